// The page-side harness (brushrl.render.harness): runs before p5, p5.brush and the sketch, with
// CONFIG = {binding, origin, allowedP5, allowedJs, entryPoints} prepended by
// Python, and the gate script's hooks (GATE_JS in harness.py) taken off window. Everything it
// needs from the page is taken here, before any other script runs, so nothing the sketch later
// defines or replaces (a top-level `const performance`, a new HTMLCanvasElement.prototype.toDataURL)
// reaches the harness.
//
// Defence in depth, independent of the static gate: every p5 function outside the gate's
// allowlist, and every platform surface a sketch could paint, read or leave through (WebGL and 2D
// contexts, canvas elements, the DOM, window functions, navigation), is wrapped. A wrapped call is
// the sketch's when, walking its stack from the caller, the first frame that is not p5's, p5.brush's
// or native is not a vetted call (a frame of the gate script: an allowlisted p5 function, a brush
// method, or such a call in progress) -- or when no library frame is on the stack at all (a native
// function the sketch scheduled). Such a call is skipped and reported; the runtime gate fails the
// sketch for it. p5 and p5.brush doing their own work under an allowed call stay untouched.
(() => {
  'use strict';
  const G = window;
  const { apply } = Reflect;
  const { defineProperty, getOwnPropertyDescriptor, getOwnPropertyNames, getOwnPropertySymbols,
          getPrototypeOf, create, freeze, preventExtensions } = Object;
  const { binding } = CONFIG;
  const gate = G.__brushrl_gate;  // {file, wrap, vetted, SKIP}: frames of that script are vetted
  delete G.__brushrl_gate;
  const perf = G.performance, perfNow = Performance.prototype.now;
  const now = () => apply(perfNow, perf, []);
  const captureStackTrace = Error.captureStackTrace;
  const fnSource = Function.prototype.toString, bind = Function.prototype.bind;
  const errorString = Error.prototype.toString;
  const stringSlice = String.prototype.slice, stringIncludes = String.prototype.includes;
  const arrayPush = Array.prototype.push;
  const jsonStringify = JSON.stringify;
  const addListener = EventTarget.prototype.addEventListener;
  const docTags = Document.prototype.getElementsByTagName;
  const collectionItem = HTMLCollection.prototype.item;
  const collectionLength = getOwnPropertyDescriptor(HTMLCollection.prototype, 'length').get;
  const canvasProto = HTMLCanvasElement.prototype;
  const toDataURL = canvasProto.toDataURL, getContext = canvasProto.getContext;
  const canvasWidth = getOwnPropertyDescriptor(canvasProto, 'width').get;
  const canvasHeight = getOwnPropertyDescriptor(canvasProto, 'height').get;
  const isConnected = getOwnPropertyDescriptor(Node.prototype, 'isConnected').get;
  const isTrusted = (e) => e.isTrusted;  // an own, unforgeable property of every Event
  const navigationObject = G.navigation;
  const navigateUrl = getOwnPropertyDescriptor(NavigateEvent.prototype, 'destination').get;
  const destinationUrl = getOwnPropertyDescriptor(NavigationDestination.prototype, 'url').get;
  const preventDefault = Event.prototype.preventDefault;
  const doc = G.document;

  // Seeded Math.random (mulberry32, Tommy Ettinger, public domain: the PRNG family p5.brush uses):
  // seed 0 while the libraries load (every page alike: a spare page loads before its seed is
  // known), the render's seed from __brushrl_start on, which also re-seeds p5.brush from it.
  /*PRNG*/
  for (const k of ['RTCPeerConnection', 'webkitRTCPeerConnection', 'RTCDataChannel']) delete G[k];

  // The page pushes to Python through a DevTools binding with a per-render name (render.page
  // SketchPage._channel), taken off window here: a native function of one string, which only the
  // harness holds. Reports are JSON text no longer than CONFIG.maxReport (a longer one is replaced
  // by an error), written with the JSON.stringify taken above from the harness's own plain data.
  const reportBinding = G[binding];
  delete G[binding];
  const MAX_REPORT = CONFIG.maxReport;
  const report = (event) => {
    let text = jsonStringify(event);
    if (text.length > MAX_REPORT) {
      text = jsonStringify({ phase: event.phase, errors: ['the ' + event.phase + ' report is ' + text.length
        + ' characters, over the cap of ' + MAX_REPORT], frames: 0, calls: {}, forbidden: {}, draw_s: 0, sketch_s: 0 });
    }
    apply(reportBinding, G, [text]);
  };
  const errors = [], calls = create(null), forbidden = create(null);
  // Record mode (CONFIG.record): brush methods only record, p5's recorded calls (CONFIG.recordP5)
  // record and run; the done report carries the log, and nothing is captured (render.calllog).
  const RECORD = !!CONFIG.record, RECORD_P5 = new Set(CONFIG.recordP5 || []), MAX_LOG = CONFIG.maxLog || 0;
  const RENDERER_RECORDED = new Set(CONFIG.recordRenderer || []);
  const log = [];  // MAX_LOG is one more than Python admits: a full log is rejected there
  let frames = 0, t0 = now(), tSketch = now(), sent = false, instance = null;
  const Str = String;
  const say = (x) => {
    try { return apply(stringSlice, Str(x && x.stack ? x.stack : x), [0, 300]); } catch (e) { return '?'; }
  };

  // -- who is calling -----------------------------------------------------------------------------
  // Error.prepareStackTrace is fixed to the harness's own formatter: the default text for every
  // error, the raw call sites for the harness's own probes (so the sketch cannot forge frames).
  let probing = false;
  const prepare = (err, sites) => {
    if (probing) return sites;
    let text;
    try { text = apply(errorString, err, []); } catch (e) { text = 'Error'; }
    for (let i = 0; i < sites.length; i++) text += '\n    at ' + sites[i];
    return text;
  };
  defineProperty(Error, 'prepareStackTrace', { value: prepare, writable: false, configurable: false });
  // Error.stackTraceLimit stays the page's (a sketch that breaks it only makes its own calls look
  // unvetted); probes read 8 frames, and all of them when 8 were not enough to decide.
  const PROBE_FRAMES = 8;
  const LIBRARY = [CONFIG.origin + '/p5.min.js', CONFIG.origin + '/p5.brush.js'];
  const GATE = gate.file;
  const probe = (wrapper, frames) => {
    const holder = {}, limit = Error.stackTraceLimit;
    probing = true;
    try {
      Error.stackTraceLimit = frames;
      captureStackTrace(holder, wrapper);
      return holder.stack;
    } finally {
      probing = false;
      Error.stackTraceLimit = limit;
    }
  };
  let lastSites = null;  // the stack of the last refused call (reported with its first refusal)
  // true: the sketch's; false: vetted; undefined: only library and native frames so far.
  const decide = (sites) => {
    for (let i = 0; i < sites.length; i++) {
      const file = sites[i].getScriptNameOrSourceURL();
      if (!file) {
        // A built-in has no line. Code without a URL is no script of the page's (the CSP has no
        // unsafe-eval, no inline handlers; the driver never evaluates here): unknown, refused.
        if (sites[i].getLineNumber() === null) continue;
        return true;
      }
      if (file === GATE) return false;  // under a vetted call
      if (file !== LIBRARY[0] && file !== LIBRARY[1]) return true;  // the sketch, or harness code on its behalf
    }
    return undefined;
  };
  const sketchCalled = (wrapper) => {
    let sites = probe(wrapper, PROBE_FRAMES), verdict = decide(sites);
    if (verdict === undefined && sites.length >= PROBE_FRAMES) verdict = decide(sites = probe(wrapper, 200));
    if (verdict === undefined) {
      // The bottom of the stack: p5's own work (its draw loop, its async set-up) has library
      // frames; with none at all it is a native function the sketch scheduled
      // (setTimeout(text.bind(...))).
      verdict = true;
      for (let i = 0; i < sites.length; i++) if (sites[i].getScriptNameOrSourceURL()) verdict = false;
    }
    if (verdict) lastSites = sites;
    return verdict;
  };
  const where = () => {
    let text = '';
    for (let i = 0; lastSites && i < lastSites.length && i < 6; i++) {
      text += (i ? ' < ' : '') + (lastSites[i].getFunctionName() || '?') + '@'
        + apply(stringSlice, Str(lastSites[i].getScriptNameOrSourceURL() || 'native'), [-24]) + ':' + lastSites[i].getLineNumber();
    }
    return text;
  };
  const note = (what) => {
    if (!(what in forbidden)) {
      forbidden[what] = 0;
      try { report({ phase: 'forbidden', name: what, where: where() }); } catch (e) { /* page going away */ }
    }
    forbidden[what] += 1;
    lastSites = null;
    // A record page ends at the first refused p5 function: the verdict is made (the runtime gate
    // fails any refusal), and a sketch that goes on with the undefined it returned would only die
    // of a TypeError (createGraphics(...).pixelDensity) or wait out the deadline (instance mode).
    if (RECORD && apply(stringSlice, what, [0, 3]) === 'p5.') finish();
  };

  // -- the call log (record mode) ------------------------------------------------------------------
  // Arguments become plain data: numbers, strings, booleans, null, arrays, and tagged objects
  // {$: 'undefined' | 'color' (p5.Color as its sRGB _array) | 'vector' | 'object' (a plain
  // object) | 'nonfinite' | 'unsupported'}. What the sketch's getters or proxies hand back here is
  // only data: Python validates every value (brushrl.render.calllog), so a forged log can hold no
  // more than whitelisted calls with bounded arguments.
  const isArray = Array.isArray, objectProto = Object.prototype, numberIsFinite = Number.isFinite;
  let colorProto = null, vectorProto = null, colorArray = null;
  const enc = (v, depth) => {
    if (++values > MAX_VALUES) throw OVER;
    try {
      const t = typeof v;
      if (t === 'number') return numberIsFinite(v) ? v : { $: 'nonfinite' };
      if (t === 'string') return v.length > 200 ? { $: 'unsupported', v: 'string of ' + v.length } : v;
      if (t === 'boolean' || v === null) return v;
      if (t === 'undefined') return { $: 'undefined' };
      if (t !== 'object' || depth > 3) return { $: 'unsupported', v: t };
      if (isArray(v)) {
        if (v.length > 10000) return { $: 'unsupported', v: 'array of ' + v.length };
        const out = [];
        for (let i = 0; i < v.length; i++) apply(arrayPush, out, [enc(v[i], depth + 1)]);
        return out;
      }
      const proto = getPrototypeOf(v);
      if (colorProto && proto === colorProto) {
        // p5's getter, called as a vetted call: it clones with window.structuredClone, which
        // would otherwise look like the sketch's call (a harness frame is below it). It calls
        // this._getRGBA(): a colour with methods or accessors of its own would run the sketch's
        // code as vetted, so such a colour is not read. The one own function p5 itself gives a
        // colour is `_initialize`, its lazy constructor (p5 2.x Color: called once by the `_color`
        // getter, then undefined); a sketch's replacement runs as the sketch's innermost frame,
        // where every guarded call is refused as it is in draw().
        const ks = getOwnPropertyNames(v);
        for (let i = 0; i < ks.length; i++) {
          const d = getOwnPropertyDescriptor(v, ks[i]);
          if (!d || d.get || d.set || (typeof d.value === 'function' && ks[i] !== '_initialize')) {
            return { $: 'unsupported', v: 'colour with own methods' };
          }
        }
        const a = gate.vetted(colorArray, v, []);
        return { $: 'color', v: [enc(a[0], 9), enc(a[1], 9), enc(a[2], 9), enc(a[3], 9)] };
      }
      if (vectorProto && proto === vectorProto) return { $: 'vector', v: [enc(v.x, 9), enc(v.y, 9), enc(v.z, 9)] };
      if (proto === objectProto) {
        const out = create(null), ks = getOwnPropertyNames(v);  // a key '__proto__' stays a key
        if (ks.length > 32) return { $: 'unsupported', v: 'object of ' + ks.length + ' keys' };
        for (let i = 0; i < ks.length; i++) out[ks[i]] = enc(v[ks[i]], depth + 1);
        return { $: 'object', v: out };
      }
      return { $: 'unsupported', v: 'object' };
    } catch (e) {
      if (e === OVER) throw e;
      return { $: 'unsupported', v: 'threw' };
    }
  };
  // The log's value budget (calllog.Bounds.max_values), counted here as Python counts it (one a
  // value, container or tag): a sketch that passes the same 10,000-number row 600 times ends at
  // once with `over` (work_budget), and never ships millions of values to Python.
  const MAX_VALUES = CONFIG.maxValues || 0, OVER = {};
  let values = 0, over = null;
  const record = (target, name, args) => {
    if (over !== null || log.length >= MAX_LOG) return;
    const out = [];
    try {
      for (let i = 0; i < args.length; i++) apply(arrayPush, out, [enc(args[i], 0)]);
    } catch (e) {
      if (e !== OVER) throw e;
      over = 'more than ' + MAX_VALUES + ' argument values';
      finish();
      return;
    }
    apply(arrayPush, log, [[target, name, out]]);
  };

  // -- p5.brush 2.2.2 as the sketch sees it (record mode) --------------------------------------------
  // The record page does not load p5.brush, so its stubs stand in for it wherever a sketch can
  // tell the difference: they throw where p5.brush throws, with its message and the sketch's line
  // (a call that throws is not logged: p5.brush changes nothing before it throws, so the replay
  // is in the same state without it), and return what p5.brush returns where a sketch can use
  // it: frozen stand-ins for its Plot and Polygon objects, circle()'s [plot, x, y] with the start
  // point p5.brush draws from (its second PRNG, mirrored here: seeded like p5.brush's from the
  // render's seed, brush.seed and p5's randomSeed), arc()'s null for a zero sweep, clip()'s
  // region. `model` mirrors the state those throws depend on, saved and restored by the sketch's
  // push()/pop() as p5.brush's hooks do.
  const Err = Error, imul = Math.imul, PI = Math.PI, mathCos = Math.cos, mathSin = Math.sin, mathAbs = Math.abs;
  const charCodeAt = String.prototype.charCodeAt;
  const BRUSH_NAMES = new Set(CONFIG.brushNames || []), FIELD_NAMES = new Set(CONFIG.fieldNames || []);
  const model = { stroke: false, fill: false, bleed: 0.07, hatch: false, mass: false, field: false, fieldName: null,
                  shape: -1, strokeOpen: false };
  const SAVED = ['stroke', 'fill', 'bleed', 'hatch', 'mass', 'field', 'fieldName'];  // what p5.brush's push saves
  const modelStack = [];
  const LUT = 1440, COS = new Float32Array(LUT), SIN = new Float32Array(LUT);
  for (let i = 0; i < LUT; i++) { COS[i] = mathCos(i * 2 * PI / LUT); SIN[i] = mathSin(i * 2 * PI / LUT); }
  const lutIndex = (t) => (t < 0 ? (t >= -360 ? ~~(4 * (t + 360)) : ~~(4 * ((t %= 360) < 0 ? t + 360 : t)))
    : t < 360 ? ~~(4 * t) : t < 720 ? ~~(4 * (t - 360)) : t < 1080 ? ~~(4 * (t - 720)) : ~~(4 * ((t %= 360) < 0 ? t + 360 : t)));
  const makePrng = (seed) => {  // p5.brush's _makePRNG (src/core/utils.js)
    let h = 0;
    const text = Str(seed);
    for (let i = 0; i < text.length; i++) {
      h = imul(h ^ apply(charCodeAt, text, [i]), 0x9e3779b9) | 0;
      h ^= h >>> 15;
    }
    h = imul(h ^ h >>> 16, 0x85ebca6b) | 0;
    h = imul(h ^ h >>> 13, 0xc2b2ae35) | 0;
    let q = (h ^ h >>> 16) >>> 0 || 1;
    return () => {
      q = q + 0x6D2B79F5 | 0;
      let t = imul(q ^ q >>> 15, q | 1);
      t ^= t + imul(t ^ t >>> 7, t | 61);
      return ((t ^ t >>> 14) >>> 0) * 2.3283064365386963e-10;
    };
  };
  let rng2 = makePrng('0:2');
  const reseed = (v) => {
    const t = typeof v;
    if (t === 'number' || t === 'string' || t === 'boolean' || v === undefined || v === null) rng2 = makePrng(Str(v) + ':2');
  };
  const rr2 = (lo, hi) => lo + rng2() * (hi - lo);
  const MIRROR_DRAWS = 2e7;  // ~0.1 s of mulberry32
  let mirrorLeft = MIRROR_DRAWS;
  const sketchLine = (fn) => {
    try {
      const sites = probe(fn, 64);
      for (let i = 0; i < sites.length; i++) {
        const file = Str(sites[i].getScriptNameOrSourceURL() || '');
        if (file === 'sketch.js' || file === CONFIG.origin + '/sketch.js') {
          return ' (sketch.js:' + sites[i].getLineNumber() + ':' + sites[i].getColumnNumber() + ')';
        }
      }
    } catch (e) { /* no line */ }
    return '';
  };
  const standIn = (kind) => freeze({ standIn: kind });
  const usesRadians = () => {
    try { return !!instance && gate.vetted(instance.angleMode, instance, []) === 'radians'; } catch (e) { return false; }
  };
  const noBrush = "No brush or color set. Call brush.set('brushName', color) before drawing.";
  const BRUSH_LIST = (CONFIG.brushNames || []).join(', '), FIELD_LIST = (CONFIG.fieldNames || []).join(', ');
  // name -> (args) => [error message or null, what the method returns, what to do once logged]
  const BRUSH_MODEL = {
    pick: (a) => [BRUSH_NAMES.has(a[0]) ? null : `Brush "${Str(a[0])}" not found. Available brushes: ${BRUSH_LIST}.`],
    set: (a) => (BRUSH_NAMES.has(a[0]) ? [null, undefined, () => { model.stroke = true; }]
      : [`Brush "${Str(a[0])}" not found. Available brushes: ${BRUSH_LIST}.`]),
    stroke: () => [null, undefined, () => { model.stroke = true; }],
    noStroke: () => [null, undefined, () => { model.stroke = false; }],
    fill: () => [null, undefined, () => { model.fill = true; }],
    noFill: () => [null, undefined, () => { model.fill = false; }],
    fillBleed: (a) => [null, undefined, () => { model.bleed = typeof a[0] === 'number' ? (a[0] < 0 ? 0 : a[0] > 1 ? 1 : a[0]) : NaN; }],
    hatch: () => [null, undefined, () => { model.hatch = true; }],
    noHatch: () => [null, undefined, () => { model.hatch = false; }],
    mass: () => [null, undefined, () => { model.mass = true; }],
    noMass: () => [null, undefined, () => { model.mass = false; }],
    line: () => [model.stroke ? null : noBrush],
    flowLine: () => [model.stroke ? null : noBrush],
    beginShape: () => [null, undefined, () => { model.shape = 0; }],
    vertex: () => [model.shape < 0 ? 'vertex() called outside of beginShape()/endShape(). Call beginShape() first.' : null,
                   undefined, () => { model.shape += 1; }],
    endShape: () => [model.shape < 0 ? 'endShape() called without beginShape(). Call beginShape() first.'
      : model.shape < 2 ? 'endShape() requires at least 2 vertices. Add more with vertex().' : null,
                     standIn('Plot'), () => { model.shape = -1; }],
    rect: () => [null, undefined, () => { model.shape = -1; }],  // p5.brush draws it with begin/endShape
    beginStroke: (a) => [a[0] !== 'curve' && a[0] !== 'segments'
      ? `beginStroke() type must be "curve" or "segments", got "${Str(a[0])}".` : null, undefined, () => { model.strokeOpen = true; }],
    move: () => [model.strokeOpen ? null : 'move() called without beginStroke(). Call beginStroke() first.'],
    endStroke: () => [model.strokeOpen ? null : 'endStroke() called without beginStroke(). Call beginStroke() first.',
                      undefined, () => { model.strokeOpen = false; }],
    spline: (a) => [!a[0] || a[0].length < 2 ? 'spline() requires at least 2 points. Each point should be [x, y, pressure].' : null,
                    standIn('Plot')],
    polygon: () => [null, standIn('Polygon')],
    clip: (a) => [null, a[0]],
    arc: (a) => {
      const deg = (v) => (usesRadians() ? 180 * v / PI : v);
      const sweep = ((deg(a[4]) - deg(a[3])) % 360 + 360) % 360;
      return [null, sweep === 0 ? null : standIn('Plot')];
    },
    circle: (a) => {
      // p5.brush's circle() (src/core/primitives.js): one rr2 for the start angle, two per
      // quarter and one more when wiggled; then its fill (with bleed) and hatch draw one rr2 per
      // pixel of the outline's length (Plot.genPol). Other filled or hatched shapes and mass draw
      // a number this page cannot know: a circle after them gets an approximate start point.
      const num = (v) => (typeof v === 'number' ? v : typeof v === 'string' ? +v : NaN);  // p5.brush's own coercion
      const r = num(a[2]), wiggle = a[3], arcLength = PI * r;
      const angle = rr2(0, 360);
      let length = 0;
      for (let i = 0; i < 4; i++) {
        if (wiggle) rng2();
        length += (arcLength / 2) * (wiggle ? 1 + wiggle * 0.2 * rng2() : 1);
      }
      if (wiggle) length += mathAbs(wiggle * ~~rr2(-5, 5)) * (PI / 180) * r;
      const value = freeze([standIn('Plot'), num(a[0]) - r * SIN[lutIndex(angle)], num(a[1]) - r * COS[lutIndex(-angle)]]);
      const steps = Math.round(length);
      const draws = (model.fill && !(model.bleed < 0.06) ? steps : 0) + (model.hatch ? steps : 0);
      return [null, value, () => {
        // at most MIRROR_DRAWS in all (a radius past the log's number bound is refused anyway):
        // past it, later start points are approximate, and the page never spins on a huge circle
        if (!(draws <= mirrorLeft)) { mirrorLeft = 0; return; }
        mirrorLeft -= draws;
        for (let i = 0; i < draws; i++) rng2();
      }];
    },
    field: (a) => [FIELD_NAMES.has(a[0]) ? null : `Field "${Str(a[0])}" does not exist. Available fields: ${FIELD_LIST}.`,
                   undefined, () => { model.field = true; model.fieldName = a[0]; }],
    noField: () => [null, undefined, () => { model.field = false; }],
    wiggle: () => [null, undefined, () => { model.field = true; model.fieldName = 'hand'; }],
    refreshField: () => [model.field && model.fieldName ? null
      : "No field is currently active. Call brush.field('name') to activate one before refreshing."],
    seed: (a) => [null, undefined, () => reseed(a[0])],
  };
  // p5's push/pop/randomSeed as p5.brush's hooks see them (called for the sketch's own calls)
  const modelP5 = (key, args) => {
    if (key === 'push') {
      const t = {};
      for (let i = 0; i < SAVED.length; i++) t[SAVED[i]] = model[SAVED[i]];
      modelStack[modelStack.length] = t;
    } else if (key === 'pop' && modelStack.length) {
      const t = modelStack[modelStack.length - 1];
      modelStack.length -= 1;
      for (let i = 0; i < SAVED.length; i++) model[SAVED[i]] = t[SAVED[i]];
    } else if (key === 'randomSeed') {
      reseed(args[0]);
    }
  };
  const brushStub = (key) => {
    const rule = BRUSH_MODEL[key];
    const stub = function () {
      const args = arguments;
      const out = rule ? rule(args) : [null];
      if (out[0] !== null && out[0] !== undefined) throw new Err(out[0] + sketchLine(stub));
      record('brush', key, args);
      if (out[2]) out[2]();
      return out[1];
    };
    return stub;
  };

  // -- wrapping -------------------------------------------------------------------------------------
  // A guard refuses the sketch's calls; an entry (an allowlisted p5 function, a brush method) is
  // always allowed, but its arguments may not smuggle native functions (a bound `text` as a
  // callback or valueOf, which the library would call with only library frames on the stack).
  const isNative = (f) => { try { return apply(stringIncludes, apply(fnSource, f, []), ['[native code]']); } catch (e) { return true; } };
  // The language's prototypes; p5's classes' (an array too: code that runs after the sketch's top
  // level iterates arrays only, whose iterator is locked before the sketch runs).
  const TRUSTED = new Set(), P5_PROTOS = new Set(), P5_CLASSES = [];
  const smuggles = (value, depth) => {
    if (typeof value === 'function') return isNative(value);
    if (value === null || typeof value !== 'object' || depth > 3) return false;
    if (P5_PROTOS.has(getPrototypeOf(value))) return false;  // a p5 vector or colour (its own bound helpers)
    for (let o = value; o !== null && !TRUSTED.has(o); o = getPrototypeOf(o)) {
      const ks = getOwnPropertyNames(o);
      const sym = getOwnPropertySymbols(o);
      for (let i = 0; i < sym.length; i++) apply(arrayPush, ks, [sym[i]]);
      for (let i = 0; i < ks.length; i++) {
        const d = getOwnPropertyDescriptor(o, ks[i]);
        if ((d.get && isNative(d.get)) || (d.set && isNative(d.set))) return true;
        if ('value' in d && (typeof d.value === 'function' ? isNative(d.value) : smuggles(d.value, depth + 1))) return true;
      }
    }
    return false;
  };
  const entryCheck = (name) => (args, self, wrapper) => {
    for (let i = 0; i < args.length; i++) {
      const a = args[i];
      if ((typeof a === 'function' || (typeof a === 'object' && a !== null)) && smuggles(a, 0) && sketchCalled(wrapper)) {
        note('argument:' + name);
        return gate.SKIP;
      }
    }
    return args;
  };
  const guardCheck = (name) => (args, self, wrapper) => {
    if (sketchCalled(wrapper)) { note(name); return gate.SKIP; }
    return args;
  };
  // A method kept as an accessor: reads give the method; `receiver.key = v` still defines an own
  // property on any other receiver (p5 and the language rely on that: `this.default = e`), but
  // replacing it on `obj` itself is refused and reported.
  const lockMethod = (obj, key, value, label) => lock(obj, key, { enumerable: false, get() { return value; }, set(v) {
    if (this === obj) { note(label + '.' + Str(key) + '='); return; }
    defineProperty(this, key, { value: v, writable: true, enumerable: true, configurable: true });
  } });
  const lock = (obj, key, desc) => {
    try { defineProperty(obj, key, { ...desc, configurable: false, ...('value' in desc ? { writable: false } : {}) }); }
    catch (e) { /* non-configurable already: keep it */ }
  };
  // Wrap every function (and setter; getters too when `getters` is set) of `obj` with the hook
  // checkFor(key, label.key) returns: a guard, an entry, or null to leave it as it is.
  const wrapAll = (obj, label, checkFor, getters) => {
    for (const key of getOwnPropertyNames(obj)) {
      if (key === 'constructor') continue;
      const d = getOwnPropertyDescriptor(obj, key);
      if (!d || !d.configurable) continue;
      const name = label + '.' + key;
      if (typeof d.value === 'function') {
        const before = checkFor(key, name);
        if (before) lockMethod(obj, key, gate.wrap(d.value, before), label);
      } else if (d.get || d.set) {
        const get = d.get && getters ? checkFor(key, name) : null;
        const set = d.set ? checkFor(key, name + '=') : null;
        lock(obj, key, { get: get ? gate.wrap(d.get, get) : d.get, set: set ? gate.wrap(d.set, set) : d.set,
                         enumerable: d.enumerable });
      }
    }
  };
  const guards = (key, name) => guardCheck(name);

  // Platform surfaces: drawing and read-back (WebGL, 2D, canvas elements), the DOM (every node
  // interface, so no element or frame can be made or inserted), and window's own functions.
  // WebGL: what paints (draws, clears, blits, uploads of pixels or geometry), reads pixels back,
  // or makes a program; state changes alone cannot put anything on the canvas.
  const GL_SURFACE = /^(draw|clear$|clearBuffer|blit|read|copyTex|copyBuffer|(compressed)?[tT]ex(Sub)?Image|buffer(Sub)?Data|shaderSource|compileShader|linkProgram|attachShader|create(Shader|Program)|getExtension)/;
  const glGuards = (key, name) => (GL_SURFACE.test(key) ? guardCheck(name) : null);
  wrapAll(WebGL2RenderingContext.prototype, 'webgl2', glGuards, false);
  wrapAll(WebGLRenderingContext.prototype, 'webgl', glGuards, false);
  wrapAll(CanvasRenderingContext2D.prototype, 'canvas2d', guards, false);
  for (const key of getOwnPropertyNames(G)) {
    const d = getOwnPropertyDescriptor(G, key);
    const ctor = d && d.value;
    if (typeof ctor === 'function' && ctor.prototype && (ctor === Node || ctor === EventTarget
        || Node.prototype.isPrototypeOf(ctor.prototype) || ctor === Range || ctor === Selection)) {
      wrapAll(ctor.prototype, ctor.prototype.constructor.name || key, guards, false);  // Image -> HTMLImageElement
    }
  }
  const windowAllowed = new Set(CONFIG.allowedJs), windowWrapped = [];
  for (const key of getOwnPropertyNames(G)) {
    const d = getOwnPropertyDescriptor(G, key);
    if (!d || typeof d.value !== 'function' || !d.configurable || windowAllowed.has(key)) continue;
    if (key[0] >= 'A' && key[0] <= 'Z') continue;  // interface objects: instanceof must keep working
    // Left configurable until __brushrl_start: p5 defines window properties of its own (print).
    defineProperty(G, key, { value: gate.wrap(d.value, guardCheck('window.' + key)), writable: true,
                             enumerable: d.enumerable, configurable: true });
    apply(arrayPush, windowWrapped, [key]);
  }
  // Navigation of any kind (location.href = ..., a form, a link) is refused here, synchronously,
  // so the refusal is in the report even when the navigation would have raced it.
  if (navigationObject) {
    apply(addListener, navigationObject, ['navigate', (e) => {
      let url = '?';
      try { url = apply(destinationUrl, apply(navigateUrl, e, []), []); } catch (err) { /* keep ? */ }
      note('navigation:' + apply(stringSlice, url, [0, 200]));
      try { apply(preventDefault, e, []); } catch (err) { /* not cancelable: Python sees it too */ }
      finish();  // the page was to be gone: report now rather than wait for the deadline
    }]);
  }

  // -- errors, capture and the report ---------------------------------------------------------------
  // The canvas captured is the document's only WebGL2 canvas, read with references taken above.
  const capture = () => {
    const found = [];
    const all = apply(docTags, doc, ['canvas']);
    for (let i = 0, n = apply(collectionLength, all, []); i < n; i++) {
      const c = apply(collectionItem, all, [i]);
      if (apply(isConnected, c, []) && apply(getContext, c, ['webgl2'])) apply(arrayPush, found, [c]);
    }
    if (found.length !== 1) return { png: null, why: found.length + ' WebGL2 canvases in the document, not 1' };
    const c = found[0];
    const own = getOwnPropertyNames(c);
    if (own.length) note('capture:canvas carries own properties ' + apply(stringSlice, jsonStringify(own), [0, 80]));
    // A record page checks its canvas as a capture would (a sketch that forges it is reported)
    // but reads no pixels: the replay paints what is judged.
    if (RECORD) return { png: null, why: null };
    return { png: apply(toDataURL, c, ['image/png']), width: apply(canvasWidth, c, []), height: apply(canvasHeight, c, []) };
  };
  const finish = () => {
    if (sent) return;
    sent = true;
    let shot = null;
    try { if (!errors.length) shot = capture(); } catch (e) { apply(arrayPush, errors, ['capture failed: ' + say(e)]); }
    const t = now();
    report({ phase: 'done', errors: errors.slice(0, 20), png: shot && shot.png, canvas: shot && shot.png ? [shot.width, shot.height] : null,
             capture: shot && shot.why, log: RECORD && over === null ? log : null, over,
             frames, calls, forbidden, draw_s: (t - t0) / 1000, sketch_s: (t - tSketch) / 1000 });
  };
  apply(addListener, G, ['error', (e) => {
    let msg = say(e.error || e.message);
    // The sketch is its own script (/sketch.js): a syntax error's line is the sketch's own.
    const where = e.filename ? e.filename.split('/').pop() + ':' + e.lineno + ':' + e.colno : '';
    if (where && !msg.includes(where)) msg = (msg + ' at ' + where).slice(0, 300);
    apply(arrayPush, errors, [msg]); finish();
  }]);
  apply(addListener, G, ['unhandledrejection', (e) => { apply(arrayPush, errors, ['unhandled rejection: ' + say(e.reason)]); finish(); }]);

  // -- after the libraries, before the sketch -------------------------------------------------------
  const allowedP5 = new Set(CONFIG.allowedP5);
  const p5Check = (key, name) => {
    if (key === 'pixelDensity') {  // pixelDensity() reads it, pixelDensity(1) is the harness's own
      const guard = guardCheck(name);
      return (args, self, w) => (args.length === 0 || (args.length === 1 && args[0] === 1) ? args : guard(args, self, w));
    }
    if (RECORD && RECORD_P5.has(key)) {
      // Recorded when the sketch made the call (p5's own nested calls, e.g. a push inside its
      // draw loop, are p5's and happen again in the replay).
      const check = entryCheck(name);
      return (args, self, w) => {
        const out = check(args, self, w);
        if (out !== gate.SKIP && sketchCalled(w)) {
          record('p5', key, out);
          modelP5(key, out);
        }
        return out;
      };
    }
    return allowedP5.has(key) ? entryCheck(name) : guardCheck(name);
  };
  const brushCheck = (key, name) => {
    const check = entryCheck(name);
    return (args, self, w) => { calls[key] = (calls[key] || 0) + 1; return check(args, self, w); };
  };
  let p5Ref = null, registerAddon = null;
  // Runs in the presetup hook: p5's constructor has decorated its classes (p5.Vector.prototype.add)
  // and bound p5.prototype's functions onto window; no sketch code has run since. p5.prototype's
  // functions become entries (the allowlist) or guards, window's copies are rebound to those, and
  // p5's classes' methods are locked: the library calls them on the sketch's values.
  const wrapP5 = (inst) => {
    const proto = p5Ref.prototype;
    wrapAll(proto, 'p5', p5Check, true);
    for (const key of getOwnPropertyNames(proto)) {
      if (key[0] === '_' || key === 'constructor') continue;
      const w = getOwnPropertyDescriptor(G, key), d = getOwnPropertyDescriptor(proto, key);
      if (w && 'value' in w && typeof w.value === 'function' && d && d.get) {
        const f = apply(d.get, proto, []);  // the entry or guard lockMethod keeps
        if (typeof f === 'function') {
          defineProperty(G, key, { value: apply(bind, f, [inst]), writable: true, enumerable: true, configurable: true });
        }
      }
    }
    // The transforms return the renderer (`translate(x, y).rotate(a)`): in record mode the
    // renderer's own transform methods record too, as target 'renderer' (its rotate takes radians
    // whatever angleMode says, so it is not p5's rotate).
    const rendererProto = p5Ref.Renderer && p5Ref.Renderer.prototype;
    for (const cls of P5_CLASSES) {
      TRUSTED.add(cls);
      const isRenderer = RECORD && rendererProto && (cls === rendererProto || rendererProto.isPrototypeOf(cls));
      for (const k of getOwnPropertyNames(cls)) {
        const d = getOwnPropertyDescriptor(cls, k);
        if (!(d.configurable && typeof d.value === 'function' && k !== 'constructor')) continue;
        let value = d.value;
        if (isRenderer && RENDERER_RECORDED.has(k)) {
          value = gate.wrap(value, (args, self, w) => {
            if (sketchCalled(w)) record('renderer', k, args);
            return args;
          });
        }
        lockMethod(cls, k, value, 'p5 class');
      }
    }
  };
  defineProperty(G, '__brushrl_start', { configurable: true, value: (seed) => {
    delete G.__brushrl_start;
    p5Ref = G.p5;
    if (RECORD) {
      // A record page does not load p5.brush: `brush` is an object of recording stubs, one per
      // export of the installed p5.brush (CONFIG.brushExports), which throw and return as
      // p5.brush does (brushStub, BRUSH_MODEL above).
      // A method the replay cannot run (a class, one that returns a value) ends the render at
      // once: the log is refused with invalid_call, where going on with the undefined it returned
      // would only end in a TypeError.
      const stubs = {}, replayable = new Set(CONFIG.replayableBrush);
      for (const key of CONFIG.brushExports) {
        stubs[key] = replayable.has(key) ? brushStub(key) : function () { record('brush', key, arguments); finish(); };
      }
      defineProperty(G, 'brush', { value: stubs, writable: false, enumerable: true, configurable: false });
    }
    const b = G.brush;
    s = seed >>> 0;
    // p5.brush drew its PRNG and noise seeds from Math.random at load (seed 0); draw them again
    // (a record page draws the same two numbers, so the sketch's own stream is the same).
    if (RECORD) {
      reseed(Math.random());  // brush.seed(Math.random()) of a page with p5.brush
      Math.random();
    } else if (b && typeof b.seed === 'function' && typeof b.noiseSeed === 'function') {
      b.seed(Math.random());
      b.noiseSeed(Math.random());
    }
    if (typeof p5Ref === 'function') {
      registerAddon = p5Ref.registerAddon;
      colorProto = p5Ref.Color && p5Ref.Color.prototype;
      const arrayDesc = colorProto && getOwnPropertyDescriptor(colorProto, '_array');
      colorArray = arrayDesc && arrayDesc.get;
      if (!colorArray) colorProto = null;  // a p5 without Color._array: colours are logged unsupported
      vectorProto = p5Ref.Vector && p5Ref.Vector.prototype;
      // p5.registerAddon, ...; the classes (p5.Vector, p5.Color, ...) keep their identity for
      // instanceof (their methods are locked once p5 has decorated them, in wrapP5).
      wrapAll(p5Ref, 'p5', (key, name) => (key[0] >= 'A' && key[0] <= 'Z' ? null : guardCheck(name)), false);
      for (const key of getOwnPropertyNames(p5Ref)) {
        const cls = getOwnPropertyDescriptor(p5Ref, key).value;
        if (typeof cls === 'function' && cls.prototype && key[0] >= 'A' && key[0] <= 'Z') {
          P5_PROTOS.add(cls.prototype);
          apply(arrayPush, P5_CLASSES, [cls.prototype]);
        }
      }
      const own = new Set(getOwnPropertyNames(p5Ref.prototype));
      for (const key of windowWrapped) if (!own.has(key)) lock(G, key, getOwnPropertyDescriptor(G, key));
    }
    if (b && typeof b === 'object') {
      // Classes (Plot, Polygon, Position) stay as they are; p5.brush calls its internals directly,
      // so `calls` counts the sketch's brush.* calls only.
      wrapAll(b, 'brush', (key, name) => (key[0] >= 'A' && key[0] <= 'Z' ? null : brushCheck(key, name)), false);
      freeze(b);
    }
    // The language's own objects: the sketch may not replace what the libraries call through
    // (Array.prototype.map = text.bind(...)), nor add to them (Object.prototype.then = ...).
    for (const o of [Object.prototype, Function.prototype, Array.prototype, String.prototype, Number.prototype,
                     Boolean.prototype, Symbol.prototype, Promise.prototype, Map.prototype, Set.prototype,
                     WeakMap.prototype, WeakSet.prototype, Error.prototype, RegExp.prototype, Date.prototype,
                     getPrototypeOf(Int8Array.prototype), getPrototypeOf([][Symbol.iterator]()),
                     getPrototypeOf(getPrototypeOf([][Symbol.iterator]())), Math, JSON, Reflect, Object, Array, Promise]) {
      TRUSTED.add(o);
      for (const key of [...getOwnPropertyNames(o), ...getOwnPropertySymbols(o)]) {
        const d = getOwnPropertyDescriptor(o, key);
        if (d && d.configurable && typeof d.value === 'function') {
          if (o === Object.prototype) {  // every object inherits these: `obj.toString = f` must work
            lockMethod(o, key, d.value, 'Object.prototype');
          } else {
            lock(o, key, d);
          }
        }
      }
      if (o !== Object && o !== Array && o !== Promise) preventExtensions(o);
    }
    tSketch = now();
    report({ phase: 'sketch' });
  } });

  // -- on load: the sketch has run its top level; p5 starts right after this listener ---------------
  // The harness's own start-up calls into p5 through gate.vetted, so they count as vetted calls.
  let armed = false;
  apply(addListener, G, ['load', (e) => {
    if (armed || !isTrusted(e)) return;
    armed = true;
    for (const name of CONFIG.entryPoints) {
      const d = getOwnPropertyDescriptor(G, name);
      if (d && (d.get || d.set)) { note('entry:' + name + ' is an accessor'); continue; }
      const user = d && d.value;
      if (typeof user !== 'function') continue;
      // p5 calls window[name](); a trampoline here is harness code, so whatever the entry point is
      // (even a bound native) its calls are the sketch's. Pinned: the sketch cannot swap it later.
      const entry = name === 'setup'
        ? async function setup() {
            t0 = now();
            if (instance) gate.vetted(instance.pixelDensity, instance, [1]);
            return await apply(user, this, arguments);
          }
        : function entry() { return apply(user, this, arguments); };
      try { defineProperty(G, name, { value: entry, writable: false }); } catch (err) { note('entry:' + name); }
    }
    if (registerAddon) {
      // Registered after p5.brush's addon, so these hooks run after brush has flushed its layers
      // (p5.brush composites at postsetup / postdraw).
      gate.vetted(registerAddon, p5Ref, [(p5, fn, lifecycles) => {
        lifecycles.presetup = function () { instance = this; wrapP5(this); };
        lifecycles.postsetup = function () {
          if (typeof G.draw !== 'function') {
            // No draw: stop p5's loop too, or its next frame comes from requestAnimationFrame,
            // with no library frame on the stack, and would be refused as the sketch's call.
            gate.vetted(this.noLoop, this, []);
            finish();
            return;
          }
          if (RECORD) apply(arrayPush, log, [['frame']]);  // what follows is drawn in draw()
          // p5 2.3's first _draw (called by its own start-up) skips drawing when less than a frame
          // interval has passed since setup and leaves the frame to requestAnimationFrame, whose
          // callback has no library frame on the stack and so looks like the sketch's call: make
          // the first frame due now, so it is always drawn on p5's own stack.
          this._lastTargetFrameTime = -Infinity;
        };
        lifecycles.postdraw = function () {
          if (gate.vetted(this.isLooping, this, [])) gate.vetted(this.noLoop, this, []);
          frames += 1; finish();
        };
      }]);
      // Nothing else may hook p5's life cycle (p5 itself still adds `remove` hooks later).
      const hooks = p5Ref.lifecycleHooks;
      for (const k of ['presetup', 'postsetup', 'predraw', 'postdraw']) if (hooks && hooks[k]) freeze(hooks[k]);
    }
  }, { capture: true }]);
})();
