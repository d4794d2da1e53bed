// The replay page (brushrl.render.calllog): re-draws a painting from a validated call log in a page
// that holds no sketch code: this script with CONFIG = {binding} prepended by Python, p5, p5.brush,
// then /start.js (`__brushrl_start(seed)`) and /sketch.js (`__brushrl_replay(entries)`), both
// written by Python from validated data. The page starts exactly like the sketch's page
// (mulberry32(0) while the libraries load, the render seed from __brushrl_start on, p5.brush's
// PRNGs drawn again from it), so the same brush calls in the same order paint the same marks.
// Targets: 'brush' (p5.brush), 'p5' (the instance), 'renderer' (what p5's transforms return).
// Entries before the ['frame'] marker run in setup(), the rest in draw(); the addon's postsetup /
// postdraw hooks (after p5.brush's flush) capture the only WebGL2 canvas and report once.
(() => {
  'use strict';
  const G = window;
  const binding = G[CONFIG.binding];  // a DevTools binding of one string (render.page SketchPage._channel)
  delete G[CONFIG.binding];
  const report = (event) => binding(JSON.stringify(event));
  const perf = G.performance;
  const now = () => perf.now();
  /*PRNG*/
  const errors = [];
  let sent = false, frames = 0, t0 = now(), tStart = now(), inst = null;
  const say = (x) => String(x && x.stack ? x.stack : x).slice(0, 300);
  const capture = () => {
    const found = [...document.getElementsByTagName('canvas')].filter((c) => c.isConnected && c.getContext('webgl2'));
    if (found.length !== 1) return { png: null, why: found.length + ' WebGL2 canvases in the document, not 1' };
    return { png: found[0].toDataURL('image/png'), width: found[0].width, height: found[0].height };
  };
  const finish = () => {
    if (sent) return;
    sent = true;
    let shot = null;
    try { if (!errors.length) shot = capture(); } catch (e) { errors.push('capture failed: ' + say(e)); }
    const t = now();
    report({ phase: 'done', errors: errors.slice(0, 20), png: shot && shot.png, canvas: shot && shot.png ? [shot.width, shot.height] : null,
             capture: shot && shot.why, frames, calls: {}, forbidden: {}, draw_s: (t - t0) / 1000, sketch_s: (t - tStart) / 1000 });
  };
  G.addEventListener('error', (e) => { errors.push(say(e.error || e.message)); finish(); });
  G.addEventListener('unhandledrejection', (e) => { errors.push('unhandled rejection: ' + say(e.reason)); finish(); });

  G.__brushrl_start = (seed) => {
    delete G.__brushrl_start;
    s = seed >>> 0;
    G.brush.seed(Math.random());
    G.brush.noiseSeed(Math.random());
    tStart = now();
    report({ phase: 'sketch' });
  };

  // A logged value back to what the sketch passed (tags: render.calllog.TAGS).
  const decode = (v) => {
    if (Array.isArray(v)) return v.map(decode);
    if (v === null || typeof v !== 'object') return v;
    if (v.$ === 'undefined') return undefined;
    if (v.$ === 'color') return inst.color(`color(srgb ${v.v[0]} ${v.v[1]} ${v.v[2]} / ${v.v[3]})`);
    if (v.$ === 'vector') return inst.createVector(v.v[0], v.v[1], v.v[2]);
    if (v.$ === 'object') {
      const out = {};
      for (const k of Object.keys(v.v)) out[k] = decode(v.v[k]);
      return out;
    }
    throw new Error('replay: unknown tag ' + v.$);  // calllog admits none
  };
  // A call that throws here threw for the sketch too (same call, same state): the error names
  // the call, since the sketch's line is not in this page.
  const run = (entries, offset) => {
    for (let i = 0; i < entries.length; i++) {
      const [target, name, args] = entries[i];
      const self = target === 'brush' ? G.brush : target === 'renderer' ? inst._renderer : inst;
      try {
        self[name](...args.map(decode));
      } catch (e) {
        throw new Error(`${target}.${name}() (call ${offset + i + 1} of the sketch's log) threw: ${e && e.message}`);
      }
    }
  };

  // After p5.brush's addon (its flush runs first): finish after setup when there is no draw,
  // else after the first frame.
  const hooks = () => G.p5.registerAddon((p5, fn, lifecycles) => {
    lifecycles.presetup = function () { inst = this; t0 = now(); };
    lifecycles.postsetup = function () {
      if (typeof G.draw !== 'function') { finish(); return; }
      this._lastTargetFrameTime = -Infinity;  // draw the first frame now (harness.js says why)
    };
    lifecycles.postdraw = function () { this.noLoop(); frames += 1; finish(); };
  });

  G.__brushrl_replay = (entries) => {
    delete G.__brushrl_replay;
    const cut = entries.findIndex((e) => e[0] === 'frame');
    const first = cut < 0 ? entries : entries.slice(0, cut);
    const rest = cut < 0 ? null : entries.slice(cut + 1);
    hooks();
    G.setup = function setup() { inst.pixelDensity(1); run(first, 0); };  // as the harness's setup does
    if (rest) G.draw = function draw() { run(rest, cut + 1); };
  };
  // The benchmark's "bare" page (render.replay_bench): the sketch itself runs here, with no
  // harness at all -- the path before the in-page wrapping, for comparison only, never scored
  // (its pixel density is the viewport's, 1, without the harness's pixelDensity(1) call).
  G.__brushrl_bare = () => { delete G.__brushrl_bare; hooks(); };
})();
