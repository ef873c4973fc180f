// brax-io trajectory viewer: a small self-contained WebGL 1 renderer (no external code).
// Called as braxViewer(container, data) by the page brax_io.html writes. World frame is z-up.
function braxViewer(root, D) {
  "use strict";
  var status = function (key, value) {
    root.setAttribute(key, value);
    if (root.getAttribute("data-page") === "1") document.body.setAttribute(key, value);
  };
  var fail = function (msg) {
    status("data-error", msg);
    var box = root.querySelector(".bv-msg");
    box.textContent = "Viewer error: " + msg;
    box.style.display = "block";
  };
  try {
    run();
  } catch (e) {
    fail(String(e && e.message ? e.message : e));
  }

  function run() {
    // ---------- trajectory: base64 little-endian float32, per frame per body [x y z qw qx qy qz]
    function decode(b64, Type) {  // base64 little-endian array
      var bin = atob(b64);
      var bytes = new Uint8Array(bin.length);
      for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
      return new Type(bytes.buffer);
    }
    var F = decode(D.frames, Float32Array);
    var nb = D.bodies.length, T = D.num_frames, dt = D.dt;
    if (F.length !== T * nb * 7) throw new Error("frame data has the wrong length");

    // ---------- WebGL setup
    var canvas = root.querySelector("canvas");
    var gl = canvas.getContext("webgl", { antialias: true, preserveDrawingBuffer: true }) ||
      canvas.getContext("experimental-webgl", { preserveDrawingBuffer: true });
    if (!gl) throw new Error("WebGL is not available in this browser");

    var VS = [
      "attribute vec3 aPos; attribute vec3 aNrm;",
      "uniform mat4 uVP; uniform mat3 uRot; uniform vec3 uTr; uniform vec3 uScale;",
      "varying vec3 vN; varying vec3 vW; varying vec2 vL;",
      "void main() {",
      "  vec3 local = aPos * uScale;",
      "  vec3 p = uRot * local + uTr;",
      "  vW = p; vL = local.xy;",
      "  vN = uRot * (aNrm / uScale);",
      "  gl_Position = uVP * vec4(p, 1.0);",
      "}"].join("\n");
    var FS = [
      "precision mediump float;",
      "uniform vec4 uColor; uniform vec3 uEye; uniform float uChecker;",
      "varying vec3 vN; varying vec3 vW; varying vec2 vL;",
      "void main() {",
      "  vec3 n = normalize(vN);",
      "  vec3 v = normalize(uEye - vW);",
      "  if (dot(n, v) < 0.0) n = -n;",
      "  vec3 l = normalize(vec3(0.35, 0.25, 1.0));",
      "  float diff = 0.3 + 0.5 * max(dot(n, l), 0.0) + 0.25 * max(dot(n, v), 0.0);",
      "  float spec = 0.2 * pow(max(dot(n, normalize(l + v)), 0.0), 40.0);",
      "  vec3 c = uColor.rgb;",
      "  if (uChecker > 0.5) {",
      "    vec2 g = floor(vL * 2.0);",
      "    c *= mod(g.x + g.y, 2.0) < 0.5 ? 0.8 : 1.1;",
      "  }",
      "  gl_FragColor = vec4(c * diff + vec3(spec), uColor.a);",
      "}"].join("\n");
    function shader(type, src) {
      var s = gl.createShader(type);
      gl.shaderSource(s, src);
      gl.compileShader(s);
      if (!gl.getShaderParameter(s, gl.COMPILE_STATUS)) throw new Error(gl.getShaderInfoLog(s));
      return s;
    }
    var prog = gl.createProgram();
    gl.attachShader(prog, shader(gl.VERTEX_SHADER, VS));
    gl.attachShader(prog, shader(gl.FRAGMENT_SHADER, FS));
    gl.linkProgram(prog);
    if (!gl.getProgramParameter(prog, gl.LINK_STATUS)) throw new Error(gl.getProgramInfoLog(prog));
    gl.useProgram(prog);
    var aPos = gl.getAttribLocation(prog, "aPos"), aNrm = gl.getAttribLocation(prog, "aNrm");
    var U = {};
    ["uVP", "uRot", "uTr", "uScale", "uColor", "uEye", "uChecker"].forEach(function (n) {
      U[n] = gl.getUniformLocation(prog, n);
    });

    // ---------- meshes (positions, normals, triangle indices)
    var uint32 = null;  // OES_element_index_uint, fetched when a mesh has more than 65536 vertices
    function upload(m) {
      var b = {};
      b.pos = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, b.pos);
      gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(m.p), gl.STATIC_DRAW);
      b.nrm = gl.createBuffer();
      gl.bindBuffer(gl.ARRAY_BUFFER, b.nrm);
      gl.bufferData(gl.ARRAY_BUFFER, new Float32Array(m.n), gl.STATIC_DRAW);
      b.idx = gl.createBuffer();
      gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, b.idx);
      b.type = gl.UNSIGNED_SHORT;
      if (m.p.length / 3 > 65536) {
        uint32 = uint32 || gl.getExtension("OES_element_index_uint");
        if (!uint32) throw new Error("a mesh has " + m.p.length / 3 + " vertices and WebGL here lacks 32-bit indices");
        b.type = gl.UNSIGNED_INT;
        gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, new Uint32Array(m.i), gl.STATIC_DRAW);
      } else {
        gl.bufferData(gl.ELEMENT_ARRAY_BUFFER, new Uint16Array(m.i), gl.STATIC_DRAW);
      }
      b.count = m.i.length;
      b.ext = 0;  // largest coordinate: how far the shape reaches from its frame
      for (var k = 0; k < m.p.length; k++) b.ext = Math.max(b.ext, Math.abs(m.p[k]));
      return b;
    }
    // A MuJoCo mesh: positions and normals per (vertex, normal) pair, triangle indices (geom frame).
    function meshData(k) {
      var m = D.meshes[k];
      return { p: decode(m.pos, Float32Array), n: decode(m.nrm, Float32Array), i: decode(m.idx, Uint32Array) };
    }
    // A MuJoCo height field's top surface: row r at y = ry (2r/(R-1) - 1), column c at
    // x = rx (2c/(C-1) - 1), z = elevation * top; normals from central differences.
    function hfieldData(k) {
      var h = D.hfields[k], R = h.nrow, C = h.ncol, s = h.size, e = decode(h.data, Float32Array);
      var p = [], n = [], idx = [];
      var dx = 2 * s[0] / Math.max(C - 1, 1), dy = 2 * s[1] / Math.max(R - 1, 1);
      function z(r, c) { return e[Math.min(R - 1, Math.max(0, r)) * C + Math.min(C - 1, Math.max(0, c))] * s[2]; }
      for (var r = 0; r < R; r++) {
        for (var c = 0; c < C; c++) {
          p.push(-s[0] + c * dx, -s[1] + r * dy, z(r, c));
          var gx = (z(r, c + 1) - z(r, c - 1)) / (2 * dx), gy = (z(r + 1, c) - z(r - 1, c)) / (2 * dy);
          var nn = unit([-gx, -gy, 1]);
          n.push(nn[0], nn[1], nn[2]);
          if (r < R - 1 && c < C - 1) {
            var i0 = r * C + c;
            idx.push(i0, i0 + 1, i0 + C + 1, i0, i0 + C + 1, i0 + C);
          }
        }
      }
      return { p: p, n: n, i: idx };
    }
    // Latitude-longitude sphere of radius r; z-offset +h for the upper half, -h for the lower
    // half (h > 0 makes a capsule: the two equator rings bound the cylindrical band).
    function roundMesh(r, h, nlat, nlon) {
      var p = [], n = [], idx = [], rings = [];
      for (var a = 0; a <= nlat; a++) {
        var th = Math.PI * a / nlat;
        rings.push([th, th <= Math.PI / 2 ? h : -h]);
        if (h > 0 && a === nlat / 2) rings.push([th, -h]);
      }
      for (var k = 0; k < rings.length; k++) {
        var st = Math.sin(rings[k][0]), ct = Math.cos(rings[k][0]);
        for (var b = 0; b <= nlon; b++) {
          var ph = 2 * Math.PI * b / nlon;
          var x = st * Math.cos(ph), y = st * Math.sin(ph), z = ct;
          p.push(r * x, r * y, r * z + rings[k][1]);
          n.push(x, y, z);
        }
      }
      for (k = 0; k < rings.length - 1; k++) {
        for (b = 0; b < nlon; b++) {
          var i0 = k * (nlon + 1) + b, i1 = i0 + nlon + 1;
          idx.push(i0, i1, i0 + 1, i0 + 1, i1, i1 + 1);
        }
      }
      return { p: p, n: n, i: idx };
    }
    function boxMesh() {
      var p = [], n = [], idx = [];
      for (var ax = 0; ax < 3; ax++) {
        for (var sgn = -1; sgn <= 1; sgn += 2) {
          var u = (ax + 1) % 3, v = (ax + 2) % 3, base = p.length / 3;
          for (var c = 0; c < 4; c++) {
            var q = [0, 0, 0], nn = [0, 0, 0];
            q[ax] = sgn; nn[ax] = sgn;
            q[u] = (c === 1 || c === 2) ? 1 : -1;
            q[v] = (c >= 2) ? 1 : -1;
            p.push(q[0], q[1], q[2]);
            n.push(nn[0], nn[1], nn[2]);
          }
          idx.push(base, base + 1, base + 2, base, base + 2, base + 3);
        }
      }
      return { p: p, n: n, i: idx };
    }
    function cylinderMesh(nseg) {
      var p = [], n = [], idx = [];
      for (var b = 0; b <= nseg; b++) {
        var ph = 2 * Math.PI * b / nseg, x = Math.cos(ph), y = Math.sin(ph);
        p.push(x, y, -1, x, y, 1);
        n.push(x, y, 0, x, y, 0);
        if (b < nseg) idx.push(2 * b, 2 * b + 2, 2 * b + 1, 2 * b + 1, 2 * b + 2, 2 * b + 3);
      }
      for (var s = -1; s <= 1; s += 2) {
        var c0 = p.length / 3;
        p.push(0, 0, s);
        n.push(0, 0, s);
        for (b = 0; b <= nseg; b++) {
          ph = 2 * Math.PI * b / nseg;
          p.push(Math.cos(ph), Math.sin(ph), s);
          n.push(0, 0, s);
          if (b < nseg) idx.push(c0, c0 + 1 + b, c0 + 2 + b);
        }
      }
      return { p: p, n: n, i: idx };
    }
    function planeMesh() {
      return { p: [-1, -1, 0, 1, -1, 0, 1, 1, 0, -1, 1, 0], n: [0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 0, 1],
               i: [0, 1, 2, 0, 2, 3] };
    }
    var shared = {};
    function sharedMesh(name, make) {
      if (!shared[name]) shared[name] = upload(make());
      return shared[name];
    }

    // ---------- scene: one draw item per visible geom
    var items = [], skipped = 0, extent = 0.5;
    D.geoms.forEach(function (g) {
      var s = g.size, mesh, scale, checker = 0;
      if (g.rgba[3] <= 0) return;
      if (g.group !== undefined && (g.group < 0 || g.group > 2)) return;  // MuJoCo shows groups 0-2
      if (g.type === "sphere") { mesh = sharedMesh("sphere", function () { return roundMesh(1, 0, 16, 24); }); scale = [s[0], s[0], s[0]]; }
      else if (g.type === "ellipsoid") { mesh = sharedMesh("sphere", function () { return roundMesh(1, 0, 16, 24); }); scale = [s[0], s[1], s[2]]; }
      else if (g.type === "box") { mesh = sharedMesh("box", boxMesh); scale = [s[0], s[1], s[2]]; }
      else if (g.type === "cylinder") { mesh = sharedMesh("cyl", function () { return cylinderMesh(32); }); scale = [s[0], s[0], s[1]]; }
      else if (g.type === "capsule") { mesh = upload(roundMesh(s[0], s[1], 16, 24)); scale = [1, 1, 1]; }
      else if (g.type === "plane") {
        mesh = sharedMesh("plane", planeMesh);
        scale = [s[0] > 0 ? s[0] : 50, s[1] > 0 ? s[1] : 50, 1];
        checker = 1;
      } else if (g.type === "mesh" && g.mesh !== undefined) {
        mesh = sharedMesh("mesh" + g.mesh, function () { return meshData(g.mesh); }); scale = [1, 1, 1];
      } else if (g.type === "hfield" && g.hfield !== undefined) {
        mesh = sharedMesh("hfield" + g.hfield, function () { return hfieldData(g.hfield); }); scale = [1, 1, 1];
      } else { skipped++; return; }  // a mesh or height field whose data the system does not carry
      if (g.type !== "plane" && g.type !== "hfield") extent = Math.max(extent, mesh.ext * Math.max(scale[0], scale[1], scale[2]));
      items.push({ g: g, mesh: mesh, scale: scale, checker: checker });
    });
    status("data-skipped", String(skipped));
    // Opaque first, then transparent.
    items.sort(function (a, b) { return (a.g.rgba[3] < 1) - (b.g.rgba[3] < 1); });

    // ---------- small math helpers (column-major 4x4, row-major quaternion to mat3)
    function qmul(a, b) {
      return [a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
              a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
              a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
              a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0]];
    }
    function qmat(q) {  // column-major mat3 for uniformMatrix3fv
      var w = q[0], x = q[1], y = q[2], z = q[3];
      var l = Math.sqrt(w * w + x * x + y * y + z * z) || 1;
      w /= l; x /= l; y /= l; z /= l;
      return [1 - 2 * (y * y + z * z), 2 * (x * y + w * z), 2 * (x * z - w * y),
              2 * (x * y - w * z), 1 - 2 * (x * x + z * z), 2 * (y * z + w * x),
              2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)];
    }
    function rotate(m, v) {
      return [m[0] * v[0] + m[3] * v[1] + m[6] * v[2],
              m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
              m[2] * v[0] + m[5] * v[1] + m[8] * v[2]];
    }
    function sub(a, b) { return [a[0] - b[0], a[1] - b[1], a[2] - b[2]]; }
    function cross(a, b) { return [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]; }
    function unit(a) { var l = Math.hypot(a[0], a[1], a[2]) || 1; return [a[0] / l, a[1] / l, a[2] / l]; }
    function dot(a, b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
    function viewProj(eye, at, aspect, near, far) {
      var f = unit(sub(at, eye)), r = unit(cross(f, [0, 0, 1]));
      if (!isFinite(r[0]) || Math.hypot(r[0], r[1], r[2]) < 1e-6) r = [1, 0, 0];
      var u = cross(r, f);
      var t = 1 / Math.tan(Math.PI / 8);  // 45 degree vertical field of view
      var a = t / aspect, nf = 1 / (near - far);
      // projection * view, written out; view rows are r, u, -f.
      var V = [r, u, [-f[0], -f[1], -f[2]]], tr = [-dot(r, eye), -dot(u, eye), dot(f, eye)];
      var m = new Float32Array(16);
      for (var c = 0; c < 4; c++) {
        var vx = c < 3 ? V[0][c] : tr[0], vy = c < 3 ? V[1][c] : tr[1], vz = c < 3 ? V[2][c] : tr[2];
        var vw = c < 3 ? 0 : 1;
        m[4 * c] = a * vx;
        m[4 * c + 1] = t * vy;
        m[4 * c + 2] = (far + near) * nf * vz + 2 * far * near * nf * vw;
        m[4 * c + 3] = -vz;
      }
      return m;
    }
    function bodyPose(frame, b) {
      var o = (frame * nb + b) * 7;
      return { p: [F[o], F[o + 1], F[o + 2]], q: [F[o + 3], F[o + 4], F[o + 5], F[o + 6]] };
    }

    // ---------- camera: orbit around a target
    var cam = { az: -1.2, el: 0.35, dist: 1, target: [0, 0, 0] };
    (function frameScene() {
      var lo = [Infinity, Infinity, Infinity], hi = [-Infinity, -Infinity, -Infinity], any = false;
      for (var b = 1; b < nb; b++) {
        var p = bodyPose(0, b).p;
        for (var k = 0; k < 3; k++) { lo[k] = Math.min(lo[k], p[k]); hi[k] = Math.max(hi[k], p[k]); }
        any = true;
      }
      if (!any) { lo = [0, 0, 0]; hi = [0, 0, 0]; }
      cam.target = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, (lo[2] + hi[2]) / 2];
      var span = Math.max(hi[0] - lo[0], hi[1] - lo[1], hi[2] - lo[2]) + 2 * extent;
      cam.dist = Math.max(1, 1.6 * span);
      cam.home = { az: cam.az, el: cam.el, dist: cam.dist, target: cam.target.slice() };
    })();

    // ---------- drawing
    var frame = 0;
    function resize() {
      var dpr = window.devicePixelRatio || 1;
      var w = Math.max(1, Math.round(canvas.clientWidth * dpr)), h = Math.max(1, Math.round(canvas.clientHeight * dpr));
      if (canvas.width !== w || canvas.height !== h) { canvas.width = w; canvas.height = h; }
    }
    function draw() {
      resize();
      gl.viewport(0, 0, canvas.width, canvas.height);
      gl.clearColor(0.93, 0.95, 0.97, 1);
      gl.clear(gl.COLOR_BUFFER_BIT | gl.DEPTH_BUFFER_BIT);
      gl.enable(gl.DEPTH_TEST);
      var ce = Math.cos(cam.el);
      var eye = [cam.target[0] + cam.dist * ce * Math.cos(cam.az),
                 cam.target[1] + cam.dist * ce * Math.sin(cam.az),
                 cam.target[2] + cam.dist * Math.sin(cam.el)];
      gl.uniformMatrix4fv(U.uVP, false, viewProj(eye, cam.target, canvas.width / canvas.height,
                                                 cam.dist * 0.01, cam.dist * 100 + 100));
      gl.uniform3fv(U.uEye, eye);
      var poses = [];
      for (var b = 0; b < nb; b++) poses.push(bodyPose(frame, b));
      for (var k = 0; k < items.length; k++) {
        var it = items[k], g = it.g, bp = poses[g.body];
        var bm = qmat(bp.q), off = rotate(bm, g.pos);
        var blend = g.rgba[3] < 1;
        if (blend) { gl.enable(gl.BLEND); gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA); gl.depthMask(false); }
        gl.uniformMatrix3fv(U.uRot, false, qmat(qmul(bp.q, g.quat)));
        gl.uniform3fv(U.uTr, [bp.p[0] + off[0], bp.p[1] + off[1], bp.p[2] + off[2]]);
        gl.uniform3fv(U.uScale, it.scale);
        gl.uniform4fv(U.uColor, g.rgba);
        gl.uniform1f(U.uChecker, it.checker);
        gl.bindBuffer(gl.ARRAY_BUFFER, it.mesh.pos);
        gl.enableVertexAttribArray(aPos);
        gl.vertexAttribPointer(aPos, 3, gl.FLOAT, false, 0, 0);
        gl.bindBuffer(gl.ARRAY_BUFFER, it.mesh.nrm);
        gl.enableVertexAttribArray(aNrm);
        gl.vertexAttribPointer(aNrm, 3, gl.FLOAT, false, 0, 0);
        gl.bindBuffer(gl.ELEMENT_ARRAY_BUFFER, it.mesh.idx);
        gl.drawElements(gl.TRIANGLES, it.mesh.count, it.mesh.type, 0);
        if (blend) { gl.disable(gl.BLEND); gl.depthMask(true); }
      }
      var err = gl.getError();
      if (err !== gl.NO_ERROR) throw new Error("WebGL error " + err);
    }

    // ---------- controls: play/pause, speed, scrubber, orbit camera
    var playBtn = root.querySelector(".bv-play"), speedSel = root.querySelector(".bv-speed");
    var scrub = root.querySelector(".bv-scrub"), label = root.querySelector(".bv-time");
    scrub.max = String(T - 1);
    var playing = T > 1, t = 0, last = null;
    function setFrame(f) {
      frame = Math.max(0, Math.min(T - 1, f));
      scrub.value = String(frame);
      label.textContent = (frame * dt).toFixed(2) + " / " + ((T - 1) * dt).toFixed(2) + " s";
    }
    function setPlaying(p) { playing = p && T > 1; playBtn.textContent = playing ? "Pause" : "Play"; last = null; }
    playBtn.addEventListener("click", function () { setPlaying(!playing); });
    scrub.addEventListener("input", function () { setFrame(parseInt(scrub.value, 10)); t = frame * dt; });
    canvas.addEventListener("keydown", function (e) { if (e.key === " ") { setPlaying(!playing); e.preventDefault(); } });
    var drag = null;
    canvas.addEventListener("contextmenu", function (e) { e.preventDefault(); });
    canvas.addEventListener("mousedown", function (e) {
      drag = { x: e.clientX, y: e.clientY, pan: e.button === 2 || e.shiftKey };
      canvas.focus();
      e.preventDefault();
    });
    window.addEventListener("mouseup", function () { drag = null; });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      drag.x = e.clientX; drag.y = e.clientY;
      if (drag.pan) {
        var s = cam.dist * 0.0015, ca = Math.cos(cam.az), sa = Math.sin(cam.az);
        cam.target[0] += s * (sa * dx - ca * Math.sin(cam.el) * dy);
        cam.target[1] += s * (-ca * dx - sa * Math.sin(cam.el) * dy);
        cam.target[2] += s * Math.cos(cam.el) * dy;
      } else {
        cam.az -= dx * 0.008;
        cam.el = Math.max(-1.5, Math.min(1.5, cam.el + dy * 0.008));
      }
    });
    canvas.addEventListener("wheel", function (e) {
      cam.dist = Math.max(0.05, cam.dist * Math.exp(e.deltaY * 0.001));
      e.preventDefault();
    }, { passive: false });
    canvas.addEventListener("dblclick", function () {
      cam.az = cam.home.az; cam.el = cam.home.el; cam.dist = cam.home.dist; cam.target = cam.home.target.slice();
    });

    setFrame(0);
    setPlaying(playing);
    draw();
    status("data-ready", "1");
    function tick(now) {
      try {
        if (playing) {
          if (last !== null) t += (now - last) / 1000 * parseFloat(speedSel.value);
          last = now;
          var f = Math.floor(t / dt + 1e-6);
          if (f > T - 1) { t = 0; f = 0; }
          if (f !== frame) setFrame(f);
        }
        draw();
        window.requestAnimationFrame(tick);
      } catch (e) {
        fail(String(e && e.message ? e.message : e));
      }
    }
    window.requestAnimationFrame(tick);
  }
}
