// hetplan report: draws the charts of the report data (the JSON in #hetplan-data) with Apache
// ECharts, and records in #hetplan-render-status how many charts finished rendering and any
// script errors (the browser test reads both).
(function () {
  'use strict';
  var status = document.getElementById('hetplan-render-status');
  var errors = [];
  function noteError(message) {
    errors.push(String(message));
    status.setAttribute('data-errors', errors.join(' | '));
    status.textContent = 'error: ' + errors.join(' | ');
  }
  window.addEventListener('error', function (e) { noteError(e.message || e); });
  var consoleError = console.error;
  console.error = function () {
    noteError(Array.prototype.join.call(arguments, ' '));
    consoleError.apply(console, arguments);
  };

  var data = JSON.parse(document.getElementById('hetplan-data').textContent);
  var GIB = 1024 * 1024 * 1024;
  var PALETTE = ['#3e63dd', '#e5484d', '#30a46c', '#f76b15', '#8e4ec6', '#12a594', '#d6409f', '#6e56cf'];
  var charts = [];

  function pct(x) { return (100 * x).toFixed(1) + '%'; }
  // The smallest 1, 2, 2.5 or 5 x 10^k at or above x: axis ends that read well.
  function niceCeil(x) {
    if (!(x > 0)) return 1;
    var base = Math.pow(10, Math.floor(Math.log10(x)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * base >= x) return steps[i] * base;
    return 10 * base;
  }
  // 1000 -> "1k", 2.5e9 -> "2.5G": labels for log axes.
  function si(v) {
    var units = ['', 'k', 'M', 'G', 'T', 'P'];
    var i = 0;
    while (Math.abs(v) >= 1000 && i < units.length - 1) { v /= 1000; i++; }
    return Number(v.toPrecision(3)) + units[i];
  }
  function fmt(x, digits) { return Number(x).toPrecision(digits || 4); }

  // Predicted against measured, with y = x and a +-10% band: one point per entry of `points`
  // (objects with source, key, model and the error under `errorKey`).
  function accuracyOption(points, unit, scale, getMeasured, getPredicted, errorKey) {
    var bySource = {}, max = 0;
    points.forEach(function (p) {
      var m = getMeasured(p), q = getPredicted(p);
      if (m === undefined || q === undefined) return;
      m /= scale; q /= scale;
      max = Math.max(max, m, q);
      (bySource[p.source] = bySource[p.source] || []).push([m, q, p.key, p[errorKey], p.model]);
    });
    max = niceCeil(max * 1.05);
    var series = [{
      type: 'custom', name: '\u00b110% band', silent: true, z: 1, data: [[0, 0]],
      renderItem: function (params, api) {
        var pts = [[0, 0], [max, max * 1.1], [max, max * 0.9]].map(function (p) { return api.coord(p); });
        return { type: 'polygon', shape: { points: pts }, style: { fill: 'rgba(62, 99, 221, 0.10)' } };
      }
    }, {
      type: 'line', name: 'y = x', data: [[0, 0], [max, max]], showSymbol: false, silent: true,
      lineStyle: { color: '#52606d', width: 1 }, z: 2
    }, {
      type: 'line', name: '\u00b110% band', data: [[0, 0], [max, max * 1.1]], showSymbol: false,
      silent: true, lineStyle: { color: '#9aa5b1', type: 'dashed', width: 1 }, z: 2
    }, {
      type: 'line', name: '\u00b110% band', data: [[0, 0], [max, max * 0.9]], showSymbol: false,
      silent: true, lineStyle: { color: '#9aa5b1', type: 'dashed', width: 1 }, z: 2
    }];
    Object.keys(bySource).sort().forEach(function (source) {
      series.push({ type: 'scatter', name: source, data: bySource[source], symbolSize: 11, z: 3 });
    });
    return {
      animation: false, color: PALETTE,
      legend: { top: 0, data: Object.keys(bySource).sort().concat(['y = x', '\u00b110% band']) },
      grid: { left: 64, right: 24, top: 40, bottom: 52 },
      tooltip: {
        trigger: 'item',
        formatter: function (p) {
          if (p.seriesType !== 'scatter') return '';
          var d = p.data;
          return d[4] + '<br>' + d[2] + '<br>measured ' + fmt(d[0]) + ' ' + unit + ', predicted ' +
                 fmt(d[1]) + ' ' + unit + '<br>error ' + pct(d[3]);
        }
      },
      xAxis: { type: 'value', name: 'measured (' + unit + ')', nameLocation: 'middle', nameGap: 30, min: 0, max: max },
      yAxis: { type: 'value', name: 'predicted (' + unit + ')', nameLocation: 'middle', nameGap: 46, min: 0, max: max },
      series: series
    };
  }

  function seriesOption(xName, yName, groups, type) {
    return {
      animation: false, color: PALETTE,
      legend: { top: 0, type: 'scroll' },
      grid: { left: 64, right: 24, top: 40, bottom: 52 },
      tooltip: { trigger: 'item', formatter: function (p) {
        return p.seriesName + '<br>' + (p.data[2] ? p.data[2] + '<br>' : '') + xName + ' ' + fmt(p.data[0], 3) +
               '<br>' + yName + ' ' + fmt(p.data[1], 3);
      } },
      xAxis: { type: 'log', name: xName, nameLocation: 'middle', nameGap: 30, axisLabel: { formatter: si } },
      yAxis: { type: 'value', name: yName, nameLocation: 'middle', nameGap: 46 },
      series: groups.map(function (g) {
        return { type: type, name: g.name, data: g.points, symbolSize: 7, showSymbol: true };
      })
    };
  }

  function timelineOption(pipe) {
    var passes = [['F', 'forward (F)', '#3e63dd'], ['B', 'input gradient (B)', '#30a46c'],
                  ['W', 'weight gradient (W)', '#f76b15']];
    var series = passes.map(function (pass) {
      return {
        type: 'custom', name: pass[1], itemStyle: { color: pass[2] },
        encode: { x: [1, 2], y: 0 },
        data: pipe.ops.filter(function (op) { return op[1] === pass[0]; })
                      .map(function (op) { return [op[0], op[3], op[4], op[2], op[5] || 0]; }),
        renderItem: function (params, api) {
          var stage = api.value(0);
          var start = api.coord([api.value(1), stage]), end = api.coord([api.value(2), stage]);
          var height = api.size([0, 1])[1] * 0.66;
          var rect = echarts.graphic.clipRectByRect(
            { x: start[0], y: start[1] - height / 2, width: Math.max(end[0] - start[0], 0.5), height: height },
            { x: params.coordSys.x, y: params.coordSys.y, width: params.coordSys.width, height: params.coordSys.height });
          if (!rect) return null;
          return {
            type: 'rect', shape: rect, style: api.style({ stroke: '#ffffff', lineWidth: 0.5,
              text: rect.width > 16 ? String(api.value(3)) : '', fill: pass[2], textFill: '#fff', fontSize: 10 })
          };
        }
      };
    });
    return {
      animation: false,
      legend: { top: 0 },
      grid: { left: 220, right: 24, top: 40, bottom: 70 },
      tooltip: { trigger: 'item', formatter: function (p) {
        return p.seriesName + ', micro-batch ' + p.data[3] +
               (pipe.chunks > 1 ? ', chunk ' + p.data[4] : '') + '<br>' + fmt(p.data[1], 4) + ' - ' +
               fmt(p.data[2], 4) + ' ms';
      } },
      dataZoom: [{ type: 'slider', xAxisIndex: 0, bottom: 10 }, { type: 'inside', xAxisIndex: 0 }],
      xAxis: { type: 'value', name: 'time (ms)', nameLocation: 'middle', nameGap: 26, min: 0 },
      yAxis: { type: 'category', data: pipe.stages, inverse: true },
      series: series
    };
  }

  function memoryOption(mem) {
    var names = ['weights', 'gradients', 'optimizer', 'activations', 'transient', 'reserve'];
    var series = names.map(function (name) {
      return { type: 'bar', stack: 'memory', name: name, data: mem.parts[name], barMaxWidth: 70 };
    });
    if (mem.measured_gib) {
      var measured = mem.measured_gib.length === mem.stages.length ? mem.measured_gib
          : mem.stages.map(function () { return Math.max.apply(null, mem.measured_gib); });
      series.push({ type: 'scatter', name: 'measured peak (' + mem.measured_kind + ')', data: measured,
                    symbol: 'diamond', symbolSize: 16, itemStyle: { color: '#111' }, z: 5 });
    }
    // Device memory is drawn when the stages fill at least half of it; else it would flatten the bars.
    var totals = mem.stages.map(function (_, i) {
      return names.reduce(function (sum, name) { return sum + mem.parts[name][i]; }, 0);
    });
    var top = Math.max.apply(null, totals.concat(mem.measured_gib || []));
    var capacity = (mem.capacity_gib || []).filter(function (c) { return c !== null; });
    var showCapacity = capacity.length && top >= 0.5 * Math.min.apply(null, capacity);
    if (showCapacity) {
      series.push({ type: 'line', name: 'device memory', data: mem.capacity_gib, step: 'middle',
                    showSymbol: false, lineStyle: { color: '#c0392b', type: 'dashed' }, z: 4 });
    }
    return {
      animation: false, color: ['#3e63dd', '#8e4ec6', '#12a594', '#f76b15', '#e5b400', '#9aa5b1'],
      legend: { top: 0, type: 'scroll' },
      grid: { left: 64, right: 24, top: 40, bottom: 60 },
      tooltip: { trigger: 'axis', axisPointer: { type: 'shadow' }, valueFormatter: function (v) {
        return v === null || v === undefined ? '-' : fmt(v, 3) + ' GiB'; } },
      xAxis: { type: 'category', data: mem.stages, axisLabel: { interval: 0, fontSize: 11 } },
      yAxis: { type: 'value', name: 'GiB per device', nameLocation: 'middle', nameGap: 40,
               max: showCapacity ? undefined : niceCeil(top * 1.15) },
      series: series
    };
  }

  var hasTime = data.pairs.some(function (p) { return p.measured_s !== undefined; });
  var hasMemory = data.pairs.some(function (p) { return p.measured_memory_bytes !== undefined; });
  if (hasTime)
    charts.push({ id: 'chart-iteration', option: accuracyOption(data.pairs, 's', 1,
      function (p) { return p.measured_s; }, function (p) { return p.predicted_s; }, 'ape') });
  if (hasMemory)
    charts.push({ id: 'chart-memory-accuracy', option: accuracyOption(data.pairs, 'GiB', GIB,
      function (p) { return p.measured_memory_bytes; }, function (p) { return p.predicted_memory_bytes; },
      'memory_ape') });
  if (data.calibration.gemm.length)
    charts.push({ id: 'chart-gemm', option: seriesOption('GEMM size (FLOPs)', 'TFLOP/s', data.calibration.gemm, 'scatter') });
  if (data.calibration.collectives.length)
    charts.push({ id: 'chart-collectives', option: seriesOption('message size (bytes)', 'bus bandwidth (GB/s)',
      data.calibration.collectives, 'line') });
  if (data.calibration.layers && data.calibration.layers.length)
    charts.push({ id: 'chart-layers', option: accuracyOption(data.calibration.layers, 'ms', 1e-3,
      function (p) { return p.measured_s; }, function (p) { return p.predicted_s; }, 'ape') });
  if (data.pipeline) charts.push({ id: 'chart-timeline', option: timelineOption(data.pipeline) });
  if (data.memory) charts.push({ id: 'chart-memory', option: memoryOption(data.memory) });

  var rendered = 0;
  function update() {
    status.setAttribute('data-charts', String(charts.length));
    status.setAttribute('data-rendered', String(rendered));
    if (!errors.length) status.textContent = 'charts rendered: ' + rendered + '/' + charts.length;
  }
  charts.forEach(function (c) {
    var el = document.getElementById(c.id);
    if (!el) { noteError('no element #' + c.id); return; }
    var chart = echarts.init(el, null, { renderer: 'canvas' });
    var done = false;
    chart.on('finished', function () {
      if (done) return;
      done = true;
      rendered += 1;
      el.setAttribute('data-rendered', 'true');
      update();
    });
    chart.setOption(c.option);
    window.addEventListener('resize', function () { chart.resize(); });
  });
  update();
})();
