// Client-side check of an upload's size, so that files over the server's limit never leave
// the browser. The server checks again (a request can be crafted).
window.dash_clientside = Object.assign({}, window.dash_clientside, {
  ccdiag: {
    checkUpload: function (contents, filenames, limit) {
      const nu = window.dash_clientside.no_update;
      if (!contents) { return [nu, nu]; }
      const list = Array.isArray(contents) ? contents : [contents];
      const names = Array.isArray(filenames) ? filenames : [filenames];
      let n = 0;
      for (const c of list) {
        const b64 = c.length - c.indexOf(',') - 1;
        n += Math.floor(b64 * 3 / 4);
      }
      const mb = (x) => (x / 1e6).toFixed(1) + ' MB';
      if (limit && n > limit) {
        return [{ ok: false, bytes: n, t: Date.now() },
          'Too large: ' + mb(n) + ' (' + list.length + ' file(s)); this server accepts up to ' +
          mb(limit) + ' per side (ccdiag app --max-upload-mb). For larger traces start the app ' +
          'with --trace-dir DIR and pick the pair there.'];
      }
      return [{ ok: true, bytes: n, t: Date.now(), contents: list, filenames: names },
        'Uploading ' + mb(n) + ' (' + list.length + ' file(s))…'];
    }
  }
});
