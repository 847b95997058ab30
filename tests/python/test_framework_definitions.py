"""scripts/framework_definitions.py on small hand-written framework trees: Megatron-LM's
add_argument options and the ones ArgumentGroupFactory builds from dataclasses (names, --no- and
--disable- forms, kinds, Literal and Enum choices, argparse_meta, exclude, inheritance across
modules, imports inside functions), DeepSpeed's sections and PipelineModule arguments, torchtitan's
Trainer.Config; read from a checkout and from a git commit; a rule whose source text is gone
stops the run (exit 1). Also: the torchtitan modules hetplan exports are valid Python.

Run: python3 -m unittest tests/python/test_framework_definitions.py
"""

import ast
import contextlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.dont_write_bytecode = True
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import framework_definitions  # noqa: E402

HETPLAN = os.environ.get("HETPLAN_BINARY", os.path.join(ROOT, "build", "cli", "hetplan"))

# The validate_args texts the Megatron-LM rule table anchors on.
VALIDATE = '''
def validate_args(args, defaults={}):
    assert x, "No more than one of the following arguments can be set at the same time"
    assert y, 'please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel degree when enable uneven pipeline parallelism'
    if args.fp16:
        assert not args.bf16
    assert z, "recompute method is not yet supported for"
    assert w, "Megatron-FSDP requires the `fsdp_dtensor` checkpointing format."
    assert v, "Using tensor model parallelism or context parallelism require setting the environment variable"
    assert u, 'FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.'
    assert t, 'FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS value large than one'
'''

MEGATRON = {
    "megatron/__init__.py": "",
    "megatron/training/__init__.py": "",
    "megatron/training/arguments.py": '''
import argparse
from megatron.core.transformer import TransformerConfig
from megatron.training.argument_utils import ArgumentGroupFactory

def add_megatron_arguments(parser):
    parser = _add_network_size_args(parser)
    parser = _add_training_args(parser)
    return parser

def _add_network_size_args(parser):
    exclude = ["activation_func"]
    factory = ArgumentGroupFactory(TransformerConfig, exclude=exclude)
    factory.build_group(parser, "transformer")
    group = parser.add_argument_group(title="network size")
    group.add_argument("--num-experts", type=int, default=None)
    group.add_argument("--normalization", default="LayerNorm", choices=["LayerNorm", "RMSNorm"])
    group.add_argument("--swiglu", action="store_true")
    group.add_argument("--use-rope-scaling", action=argparse.BooleanOptionalAction)
    group.add_argument("--data-path", nargs="*", default=None)
    group.add_argument("--pipeline-model-parallel-layout", type=str, default=None)
    return parser

def _add_training_args(parser):
    from megatron.training.config import TrainingConfig
    ArgumentGroupFactory(TrainingConfig).build_group(parser, "training")
    parser.add_argument("--lr", type=float)
    return parser

def _unused(parser):
    parser.add_argument("--never-added", action="store_true")
''' + VALIDATE,
    "megatron/core/__init__.py": "",
    "megatron/core/transformer/__init__.py":
        "from .transformer_config import TransformerConfig\n",
    "megatron/core/transformer/enums.py": '''
import enum
class AttnBackend(enum.Enum):
    flash = 1
    unfused = 3
    auto = 5
''',
    "megatron/core/model_parallel_config.py": '''
from dataclasses import dataclass, field
from typing import Optional
@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
    sequence_parallel: bool = False
    gradient_accumulation_fusion: bool = True
    perform_initialization: bool = field(
        default=True, metadata={"argparse_meta": {"arg_names": ["--no-initialization"]}})
    pipeline_dtype: Optional[int] = None
''',
    "megatron/core/transformer/transformer_config.py": '''
from dataclasses import dataclass, field
from typing import Callable, ClassVar, List, Literal, Optional, Union
from megatron.core.transformer.enums import AttnBackend
from ..model_parallel_config import ModelParallelConfig
@dataclass
class TransformerConfig(ModelParallelConfig):
    kMax: ClassVar[int] = 3
    num_layers: int = field(default=0, metadata={"argparse_meta": {"default": None}})
    hidden_dropout: float = 0.1
    add_bias_linear: bool = field(
        default=True, metadata={"argparse_meta": {"arg_names": ["--disable-bias-linear"]}})
    attention_backend: AttnBackend = AttnBackend.auto
    recompute_granularity: Optional[Literal["full", "selective"]] = None
    recompute_modules: Optional[List[str]] = None
    flash_attention_version: Literal[2, 3] | None = None
    activation_func: Callable = None
    window_size: Union[int, List[int]] = field(
        default=None, metadata={"argparse_meta": {"type": int, "nargs": "+"}})
    derived: int = field(default=0, init=False)
''',
    "megatron/training/config/__init__.py":
        "from megatron.training.config.training_config import TrainingConfig\n",
    "megatron/training/config/training_config.py": '''
from dataclasses import dataclass
@dataclass(kw_only=True)
class TrainingConfig:
    micro_batch_size: int | None = None
    check_weight_hash: bool | None = None
''',
}

DEEPSPEED = {
    "deepspeed/__init__.py": "",
    "deepspeed/runtime/__init__.py": "",
    "deepspeed/runtime/constants.py":
        'TRAIN_BATCH_SIZE = "train_batch_size"\n'
        'TRAIN_MICRO_BATCH_SIZE_PER_GPU = "train_micro_batch_size_per_gpu"\n'
        'GRADIENT_ACCUMULATION_STEPS = "gradient_accumulation_steps"\n',
    "deepspeed/runtime/config.py": '''
def get_pipeline_config(param_dict):
    default_pipeline = {"stages": "auto", "partition": "best", "activation_checkpoint_interval": 0}
    return default_pipeline
class DeepSpeedConfig:
    def __init__(self, config, mpu=None):
        if mpu is not None:
            self.world_size = mpu.get_data_parallel_world_size()
        else:
            self.world_size = dist.get_world_size()
    def _batch_assertion(self):
        assert train_batch == micro_batch * grad_acc * self.world_size
''',
    "deepspeed/runtime/config_utils.py": "class DeepSpeedConfigModel:\n    pass\n",
    "deepspeed/runtime/precision_config.py": '''
from .config_utils import DeepSpeedConfigModel
class DeepSpeedBF16Config(DeepSpeedConfigModel):
    enabled: bool = False
class DeepSpeedFP16Config(DeepSpeedConfigModel):
    enabled: bool = False
    loss_scale: float = 0
''',
    "deepspeed/runtime/zero/__init__.py": "",
    "deepspeed/runtime/zero/config.py": '''
from enum import Enum
from typing import Optional
from pydantic import Field
from deepspeed.runtime.config_utils import DeepSpeedConfigModel
class ZeroStageEnum(int, Enum):
    disabled = 0
    optimizer_states = 1
    gradients = 2
    weights = 3
    max_stage = 3
class DeepSpeedZeroConfig(DeepSpeedConfigModel):
    stage: ZeroStageEnum = 0
    overlap_comm: Optional[bool] = None
    prefetch_bucket_size: int = Field(5, ge=0, alias="stage3_prefetch_bucket_size")
''',
    "deepspeed/runtime/tensor_parallel/__init__.py": "",
    "deepspeed/runtime/tensor_parallel/config.py": '''
from deepspeed.runtime.config_utils import DeepSpeedConfigModel
class TPTrainingConfig(DeepSpeedConfigModel):
    autotp_size: int = 0
''',
    "deepspeed/runtime/activation_checkpointing/__init__.py": "",
    "deepspeed/runtime/activation_checkpointing/config.py":
        'ACT_CHKPT = "activation_checkpointing"\n'
        'ACT_CHKPT_PROFILE = "profile"\nACT_CHKPT_PROFILE_DEFAULT = False\n'
        'ACT_CHKPT_NUMBER_CHECKPOINTS = "number_checkpoints"\n'
        'ACT_CHKPT_NUMBER_CHECKPOINTS_DEFAULT = None\n',
    "deepspeed/runtime/pipe/__init__.py": "",
    "deepspeed/runtime/pipe/module.py": '''
class PipelineModule:
    def __init__(self, layers, num_stages=None, topology=None, partition_method="parameters",
                 activation_checkpoint_interval=0):
        topology = PipeDataParallelTopology(num_pp=num_stages, num_dp=dp)
    def _partition_layers(self, method="uniform"):
        if method == "uniform":
            pass
        elif method == "parameters":
            pass
        elif method.startswith("type:"):
            pass
        elif method == "profile":
            raise NotImplementedError()
''',
    "deepspeed/runtime/pipe/topology.py": '''
class ProcessTopology:
    def __init__(self, axes, dims):
        pass
class PipeDataParallelTopology(ProcessTopology):
    def __init__(self, num_pp, num_dp):
        super().__init__(axes=["pipe", "data"], dims=[num_pp, num_dp])
class PipeModelDataParallelTopology(ProcessTopology):
    def __init__(self, num_pp, num_mp, num_dp):
        super().__init__(axes=["pipe", "data", "model"], dims=[num_pp, num_dp, num_mp])
''',
    "deepspeed/runtime/pipe/engine.py": '''
class PipelineEngine:
    def __init__(self):
        assert self.zero_optimization_stage() < 2, "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
        if self._config.pipeline["activation_checkpoint_interval"] > 0:
            pass
        if self._config.pipeline.get("use_reentrant") is None:
            pass
''',
}

TORCHTITAN = {
    "torchtitan/__init__.py": "",
    "torchtitan/train.py": "",
    "torchtitan/config/__init__.py":
        "from .configs import ParallelismConfig, TrainingConfig\n"
        "from .configurable import Configurable\n",
    "torchtitan/config/configurable.py": '''
from dataclasses import dataclass
class Configurable:
    @dataclass
    class Config:
        pass
''',
    "torchtitan/config/manager.py": 'ARGS = ("--module", "--config")\n',
    "torchtitan/config/configs.py": '''
from dataclasses import dataclass
from typing import Literal
@dataclass(kw_only=True, slots=True)
class TrainingConfig:
    num_tokens_per_microbatch_per_dp_rank: int = 16384
    disable_cuda_graphs: bool = False
    mixed_precision_param: Literal["bfloat16", "float32"] = "bfloat16"
@dataclass(kw_only=True, slots=True)
class ParallelismConfig:
    pipeline_parallel_schedule: str = "1F1B"
    module_fqns_per_model_part: list[list[str]] | None = None
@dataclass(kw_only=True, slots=True)
class CompileConfig:
    enable: bool = False
    enable_async_tensor_parallel: bool = False
    def __post_init__(self):
        raise ValueError("Async TP requires 'model' in --compile.components and --compile.enable")
''',
    "torchtitan/distributed/__init__.py": "",
    "torchtitan/distributed/activation_checkpoint.py": '''
from typing import Annotated
import tyro
from torchtitan.config import Configurable
class ActivationCheckpointing(Configurable):
    class Config(Configurable.Config):
        pass
class FullAC(ActivationCheckpointing):
    class Config(ActivationCheckpointing.Config):
        pass
ActivationCheckpointingConfig = (
    Annotated[FullAC.Config, tyro.conf.subcommand("full")]
    | Annotated[None, tyro.conf.subcommand("none")]
)
''',
    "torchtitan/models/__init__.py": "",
    "torchtitan/models/common/__init__.py": "",
    "torchtitan/models/common/decoder.py": '''
class Decoder:
    def __init__(self, config):
        self.tok_embeddings = config.tok_embeddings.build()
        self.layers = {}
        self.norm = config.norm.build()
        self.lm_head = config.lm_head.build()
''',
    "torchtitan/trainer.py": '''
from dataclasses import dataclass, field
from torchtitan.config import Configurable
from torchtitan.config.configs import CompileConfig, ParallelismConfig, TrainingConfig
from torchtitan.distributed.activation_checkpoint import ActivationCheckpointingConfig, FullAC
class Trainer:
    @dataclass
    class Config(Configurable.Config):
        training: TrainingConfig = field(default_factory=TrainingConfig)
        parallelism: ParallelismConfig = field(default_factory=ParallelismConfig)
        compile: CompileConfig = field(default_factory=CompileConfig)
        activation_checkpoint: ActivationCheckpointingConfig = field(default_factory=FullAC.Config)
        def _validate_cuda_graphs(self):
            raise ValueError("CUDA graphs do not support pipeline parallelism yet. ")
            raise ValueError("CUDA graphs support only expert parallel token dispatcher "
                             "configurations without CPU synchronization. ")
    def __init__(self):
        raise ValueError("The number of tokens per pipeline microbatch")
        raise ValueError("of tokens processed globally in one gradient accumulation ")
''',
}


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(argv):
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = framework_definitions.main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
            if not isinstance(e.code, int):
                err.write(str(e.code))
    return code, out.getvalue(), err.getvalue()


def definitions(text):
    """NAME -> "KIND [CHOICES]" of the option and key lines."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, rest = line.partition(" ")
            out.setdefault(name, rest)
    return out


class MegatronTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()
        write_tree(self.dir, MEGATRON)

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_options_of_add_argument_and_the_dataclass_groups(self):
        code, out, err = run(["megatron", "--repo", self.dir])
        self.assertEqual(code, 0, err)
        d = definitions(out)
        # add_argument: kinds, choices, BooleanOptionalAction's --no- form, the layout kind.
        self.assertEqual(d["--num-experts"], "int")
        self.assertEqual(d["--normalization"], "str LayerNorm,RMSNorm")
        self.assertEqual(d["--swiglu"], "flag")
        self.assertEqual(d["--use-rope-scaling"], "flag")
        self.assertEqual(d["--no-use-rope-scaling"], "flag")
        self.assertEqual(d["--data-path"], "list")
        self.assertEqual(d["--pipeline-model-parallel-layout"], "layout")
        self.assertEqual(d["--lr"], "float")
        self.assertNotIn("--never-added", d)  # a function add_megatron_arguments does not call
        # ArgumentGroupFactory over TransformerConfig and its base, in another module.
        self.assertEqual(d["--tensor-model-parallel-size"], "int")
        self.assertEqual(d["--sequence-parallel"], "flag")
        # A bool defaulting to true: --no- and --disable- forms, unless argparse_meta names it.
        self.assertEqual(d["--no-gradient-accumulation-fusion"], "flag")
        self.assertEqual(d["--disable-gradient-accumulation-fusion"], "flag")
        self.assertNotIn("--gradient-accumulation-fusion", d)
        self.assertEqual(d["--disable-bias-linear"], "flag")
        self.assertNotIn("--no-add-bias-linear", d)
        self.assertEqual(d["--no-initialization"], "flag")
        self.assertEqual(d["--num-layers"], "int")
        self.assertEqual(d["--hidden-dropout"], "float")
        # Enum members, Optional[Literal], Optional[List[str]], Literal | None.
        self.assertEqual(d["--attention-backend"], "str flash,unfused,auto")
        self.assertEqual(d["--recompute-granularity"], "str full,selective")
        self.assertEqual(d["--recompute-modules"], "list")
        self.assertEqual(d["--flash-attention-version"], "int 2,3")
        self.assertEqual(d["--window-size"], "list")  # a Union, typed by its argparse_meta
        self.assertEqual(d["--pipeline-dtype"], "int")
        for absent in ("--activation-func", "--derived", "--k-max"):  # excluded, init=False,
            self.assertNotIn(absent, d)                                 # ClassVar
        # TrainingConfig, imported inside the function; an Optional bool defaulting to None is
        # store_false (None == False is false), so --no- and --disable-.
        self.assertEqual(d["--micro-batch-size"], "int")
        self.assertEqual(d["--no-check-weight-hash"], "flag")
        # The rules, each after the validate_args text it comes from.
        self.assertIn("exclusive --fp16 --bf16", out)
        self.assertIn("requires --use-megatron-fsdp $CUDA_DEVICE_MAX_CONNECTIONS!=1", out)
        self.assertIn("# validate_args: \"FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or "
                      "unset.\"", out)
        self.assertIn("checkout " + self.dir, out)

    def test_a_rule_whose_text_is_gone_stops_the_run(self):
        path = os.path.join(self.dir, "megatron/training/arguments.py")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace("FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset.",
                                 "FSDP wants more connections."))
        code, out, err = run(["megatron", "--repo", self.dir])
        self.assertEqual(code, 1)
        self.assertEqual(out, "")
        self.assertIn("the text of rule \"requires --use-megatron-fsdp "
                      "$CUDA_DEVICE_MAX_CONNECTIONS!=1\" is gone", err)

    @unittest.skipUnless(shutil.which("git"), "git not installed")
    def test_reads_a_commit_of_a_git_repository(self):
        git = ["git", "-C", self.dir, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git[:3] + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-q", "-m", "one"], check=True)
        first = subprocess.run(git[:3] + ["rev-parse", "HEAD"], capture_output=True, text=True,
                               check=True).stdout.strip()
        path = os.path.join(self.dir, "megatron/training/arguments.py")
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path, "w", encoding="utf-8") as f:
            f.write(text.replace('"--swiglu"', '"--swiglu-renamed"'))
        subprocess.run(git + ["commit", "-q", "-am", "two"], check=True)
        code, out, err = run(["megatron", "--repo", self.dir, "--commit", first])
        self.assertEqual(code, 0, err)
        self.assertIn("--swiglu flag", out)
        self.assertNotIn("--swiglu-renamed", out)
        self.assertIn(f"# version:    {first} (", out)
        code, out, _ = run(["megatron", "--repo", self.dir, "--commit", "HEAD"])
        self.assertIn("--swiglu-renamed flag", out)


class DeepSpeedAndTorchtitanTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def test_deepspeed_sections_pipeline_keys_and_pipeline_module(self):
        write_tree(self.dir, DEEPSPEED)
        code, out, err = run(["deepspeed", "--repo", self.dir])
        self.assertEqual(code, 0, err)
        d = definitions(out)
        self.assertEqual(d["train_batch_size"], "int")
        self.assertEqual(d["zero_optimization"], "section closed")
        self.assertEqual(d["zero_optimization.stage"], "int 0,1,2,3")  # the Enum's values
        self.assertEqual(d["zero_optimization.overlap_comm"], "bool?")
        self.assertEqual(d["zero_optimization.stage3_prefetch_bucket_size"], "int")  # the alias
        self.assertEqual(d["fp16.loss_scale"], "float")
        self.assertEqual(d["activation_checkpointing.profile"], "bool")
        self.assertEqual(d["activation_checkpointing.number_checkpoints"], "int?")
        # The engine reads activation_checkpoint_interval and use_reentrant, not stages/partition.
        self.assertEqual(d["pipeline.stages"], "ignored")
        self.assertEqual(d["pipeline.partition"], "ignored")
        self.assertEqual(d["pipeline.activation_checkpoint_interval"], "int")
        self.assertEqual(d["pipeline.use_reentrant"], "any")
        self.assertEqual(d["PipelineModule.partition_method"], "str uniform,parameters,type:*")
        self.assertEqual(d["PipelineModule.num_stages"], "int?")
        self.assertEqual(d["PipeModelDataParallelTopology.num_mp"], "int")
        self.assertIn("batch train_batch_size train_micro_batch_size_per_gpu "
                      "gradient_accumulation_steps", out)
        self.assertIn("pipeline-zero-max 1", out)

    def test_torchtitan_trainer_config(self):
        write_tree(self.dir, TORCHTITAN)
        code, out, err = run(["torchtitan", "--repo", self.dir])
        self.assertEqual(code, 0, err)
        d = definitions(out)
        self.assertEqual(d["TrainingConfig.mixed_precision_param"], "str bfloat16,float32")
        self.assertEqual(d["TrainingConfig.disable_cuda_graphs"], "bool")
        self.assertEqual(d["ParallelismConfig.module_fqns_per_model_part"], "list2?")
        self.assertTrue(d["ParallelismConfig.pipeline_parallel_schedule"].startswith(
            "str 1F1B,Interleaved1F1B,GPipe"))
        lines = out.splitlines()
        self.assertIn("section training TrainingConfig", lines)
        self.assertIn("policy activation_checkpoint FullAC.Config(),None", lines)
        self.assertIn("import torchtitan.config ParallelismConfig TrainingConfig", lines)
        self.assertIn("import torchtitan.distributed.activation_checkpoint FullAC", lines)
        self.assertEqual([x for x in lines if x.startswith("module ")],
                         ["module tok_embeddings", "module layers.*", "module norm",
                          "module lm_head"])
        self.assertIn("schedule Interleaved1F1B rounds", lines)
        self.assertIn("requires ParallelismConfig.pipeline_parallel_degree>1 "
                      "TrainingConfig.disable_cuda_graphs=True", lines)
        self.assertIn("requires ParallelismConfig.expert_parallel_degree>1 "
                      "TrainingConfig.disable_cuda_graphs=True", lines)
        self.assertIn("section compile CompileConfig", lines)
        self.assertEqual(d["CompileConfig.enable_async_tensor_parallel"], "bool")
        self.assertIn("requires CompileConfig.enable_async_tensor_parallel=True "
                      "CompileConfig.enable=True", lines)

    def test_pytorch_schedules_file_is_checked_against_the_table(self):
        write_tree(self.dir, TORCHTITAN)
        schedules = os.path.join(self.dir, "schedules.py")
        names = framework_definitions.PYTORCH_SCHEDULE_NAMES
        body = "\n".join(f"    # {r['anchor']}" for r in
                         framework_definitions.PYTORCH_SCHEDULE_RULES)
        with open(schedules, "w", encoding="utf-8") as f:
            f.write("def get_schedule_class(name):\n" + body + "\n    schedule_map = {" +
                    ", ".join(f'"{n}": None' for n in names) + "}\n")
        code, _, err = run(["torchtitan", "--repo", self.dir, "--pytorch-schedules", schedules])
        self.assertEqual(code, 0, err)
        with open(schedules, "w", encoding="utf-8") as f:
            f.write("def get_schedule_class(name):\n" + body + "\n    schedule_map = {" +
                    ", ".join(f'"{n}": None' for n in names[:-1]) + "}\n")
        code, _, err = run(["torchtitan", "--repo", self.dir, "--pytorch-schedules", schedules])
        self.assertEqual(code, 1)
        self.assertIn("get_schedule_class names", err)


@unittest.skipUnless(os.path.exists(HETPLAN), f"{HETPLAN} not built")
class ExportedTorchtitanModuleTest(unittest.TestCase):
    """The Python hetplan writes for torchtitan parses, and its function sets what it says."""

    def test_exports_are_python(self):
        with tempfile.TemporaryDirectory() as d:
            for i, strategy in enumerate([
                    '{"dp": 2, "tp": 2, "pp": 2, "micro_batch": 1, "global_batch": 16, '
                    '"recompute": "full", "zero": 3, "stages": [{"layers": [0, 12]}, '
                    '{"layers": [13, 25]}]}',
                    '{"dp": 4, "tp": 1, "pp": 1, "micro_batch": 2, "global_batch": 64, '
                    '"recompute": "selective"}']):
                path = os.path.join(d, f"s{i}.json")
                with open(path, "w", encoding="utf-8") as f:
                    f.write(strategy)
                r = subprocess.run([HETPLAN, "export", "--strategy", path, "--model",
                                    "gpt2-medium", "--format", "torchtitan"],
                                   capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                tree = ast.parse(r.stdout)
                fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
                self.assertEqual(fn.name, "hetplan_config")
                compile(tree, "hetplan_torchtitan.py", "exec")
                self.assertIn("to run it: save the file as hetplan_torchtitan.py", r.stderr)


if __name__ == "__main__":
    unittest.main()
