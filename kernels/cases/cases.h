// The registry's case lists, one function per file of this folder.
#pragma once

#include <vector>

#include "kernels/registry.h"

namespace hetplan::kernels::cases {

void add_probe_cases(std::vector<Case>& out);          // probe_cases.cpp
void add_embedding_cases(std::vector<Case>& out);      // rows_cases.cpp
void add_norm_cases(std::vector<Case>& out);           // norm_cases.cpp
void add_rotary_cases(std::vector<Case>& out);         // rows_cases.cpp
void add_attention_cases(std::vector<Case>& out);      // attention_cases.cpp
void add_elementwise_cases(std::vector<Case>& out);    // elementwise_cases.cpp
void add_cross_entropy_cases(std::vector<Case>& out);  // rows_cases.cpp
void add_optimizer_cases(std::vector<Case>& out);      // elementwise_cases.cpp

}  // namespace hetplan::kernels::cases
