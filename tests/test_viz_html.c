/* The interactive attention page in a real browser: headless Chromium loads the page inside
 * an iframe of a small driver page, reads the token labels and cell colours from the DOM,
 * switches layer and head through the page's own <select> controls (change events, as a
 * user would) and reports what is shown. The colours are checked against the weights:
 * cell (q, k) = viridis(w / max w of the shown matrix), the map of attn_viz.h.
 * Skipped, with a message, only when no chromium binary is installed (scripts/setup.sh
 * installs the Debian package chromium). */
#include "attn_viz.h"
#include "attn_viz_html.h"
#include "testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static const char *find_chromium(void) {
    static const char *const names[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", NULL};
    const char *env = getenv("ATTN_CHROMIUM");
    if (env && access(env, X_OK) == 0) return env;
    for (int i = 0; names[i]; i++)
        if (access(names[i], X_OK) == 0) return names[i];
    return NULL;
}

/* "rgb(r, g, b)" -> 0xrrggbb, or 0xffffffff */
static unsigned parse_rgb(const char *s) {
    int r, g, b;
    if (!s || sscanf(s, "rgb(%d, %d, %d)", &r, &g, &b) != 3) return 0xffffffffu;
    return ((unsigned)r << 16) | ((unsigned)g << 8) | (unsigned)b;
}

static int rgb_close(unsigned a, unsigned b, int tol) {
    if (a == 0xffffffffu || b == 0xffffffffu) return 0;
    for (int sh = 0; sh <= 16; sh += 8) {
        int d = (int)((a >> sh) & 255) - (int)((b >> sh) & 255);
        if (d > tol || d < -tol) return 0;
    }
    return 1;
}

/* the value after "key=" up to the end of its line in the dumped DOM, or NULL */
static char *field(const char *dom, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s=", key);
    const char *p = strstr(dom, pat);
    if (!p) return NULL;
    p += strlen(pat);
    size_t n = strcspn(p, "\n");
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

enum { NL = 2, H = 3, T = 4 };
static float w[NL][H][T][T];

/* expected colour of cell (q, k) of layer l, head h (-1 = mean), normalised by the max */
static unsigned want(int l, int h, int q, int k) {
    double m[T][T], mx = 0;
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            double v = 0;
            if (h >= 0) v = w[l][h][i][j];
            else {
                for (int a = 0; a < H; a++) v += w[l][a][i][j] / H;
            }
            m[i][j] = v;
            if (v > mx) mx = v;
        }
    unsigned char c[3];
    attn_colormap_rgb(ATTN_CMAP_VIRIDIS, (float)(m[q][k] / mx), c);
    return ((unsigned)c[0] << 16) | ((unsigned)c[1] << 8) | c[2];
}

int main(void) {
    attn_test_name = "viz_html";
    const char *chromium = find_chromium();
    if (!chromium) {
        printf("SKIP viz_html: chromium is not installed (Debian package chromium; scripts/setup.sh installs it), "
               "the page was not checked in a browser\n");
        return attn_test_finish();
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/attn_test_vizhtml_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        CHECK(0, "mkdtemp failed");
        return attn_test_finish();
    }
    /* softmax-like rows, every (layer, head) different */
    uint64_t seed = 2024;
    for (int l = 0; l < NL; l++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                float r[T], s = 0;
                attn_test_fill_uniform(r, T, 0.05f, 1, &seed);
                for (int j = 0; j < T; j++) s += r[j];
                for (int j = 0; j < T; j++) w[l][h][i][j] = r[j] / s;
            }
    const char *tok[T] = {"[CLS]", "a</script>", "\xe7\x8c\xab", "[SEP]"}; /* 猫 */
    attn_tensor t = attn_tensor_f32_4d(&w[0][0][0][0], NL, H, T, T);
    char page[512], drv[512], dom_path[512];
    snprintf(page, sizeof page, "%s/page.html", tmpdir);
    snprintf(drv, sizeof drv, "%s/driver.html", tmpdir);
    snprintf(dom_path, sizeof dom_path, "%s/dom.txt", tmpdir);
    /* starts on layer 1, head 2 */
    CHECK_OK(attn_attention_html(page, &t, tok, "browser test", 1, 2));

    FILE *f = fopen(drv, "w");
    CHECK(f != NULL, "driver page written");
    if (!f) return attn_test_finish();
    fputs("<!DOCTYPE html><html><body><iframe id=\"f\" src=\"page.html\" width=\"1200\" height=\"900\"></iframe>\n"
          "<pre id=\"out\">pending</pre><script>\n"
          "const f=document.getElementById('f');\n"
          "f.onload=()=>{const d=f.contentDocument,o=[''];\n"
          " const cells=()=>[...d.querySelectorAll('#heat rect.cell')].map(r=>r.getAttribute('data-q')+','+r.getAttribute('data-k')+','+getComputedStyle(r).fill).join(';');\n"
          " const state=n=>{o.push(n+'_shown='+d.body.dataset.shown);o.push(n+'_cells='+cells());};\n"
          " o.push('rows='+[...d.querySelectorAll('#heat text.row')].map(e=>e.textContent).join('|'));\n"
          " o.push('cols='+[...d.querySelectorAll('#heat text.col')].map(e=>e.textContent).join('|'));\n"
          " o.push('heads='+[...d.querySelectorAll('#lines text.q')].map(e=>e.textContent).join('|'));\n"
          " const ls=d.getElementById('layer'),hs=d.getElementById('head');\n"
          " state('init');\n"
          " ls.value='0';ls.dispatchEvent(new Event('change'));state('layer0');\n"
          " hs.value='mean';hs.dispatchEvent(new Event('change'));state('mean');\n"
          " hs.value='1';hs.dispatchEvent(new Event('change'));state('head1');\n"
          " o.push('end=1');document.getElementById('out').textContent=o.join('\\n')+'\\n';};\n"
          "</script></body></html>\n",
          f);
    fclose(f);

    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 60 '%s' --headless --no-sandbox --disable-gpu --allow-file-access-from-files "
             "--virtual-time-budget=10000 --user-data-dir='%s/profile' --dump-dom 'file://%s' > '%s' 2>/dev/null",
             chromium, tmpdir, drv, dom_path);
    int rc = system(cmd);
    CHECK(rc == 0, "chromium ran (%s -> %d)", chromium, rc);
    static char dom[1 << 20];
    attn_test_read_file(dom_path, dom, sizeof dom);
    char buf[1 << 16];
    CHECK(strstr(dom, "\nend=1") != NULL, "the driver read the page in the browser (page loaded, script ran)");
    /* the DOM dump escapes < > & in text: the token "a</script>" reads back escaped */
    CHECK(field(dom, "rows", buf, sizeof buf) && strcmp(buf, "[CLS]|a&lt;/script&gt;|\xe7\x8c\xab|[SEP]") == 0,
          "row labels are the tokens (got '%s')", field(dom, "rows", buf, sizeof buf) ? buf : "");
    CHECK(field(dom, "cols", buf, sizeof buf) && strcmp(buf, "[CLS]|a&lt;/script&gt;|\xe7\x8c\xab|[SEP]") == 0,
          "column labels are the tokens");
    CHECK(field(dom, "heads", buf, sizeof buf) && strstr(buf, "\xe7\x8c\xab") != NULL, "head view lists the tokens");

    static const struct {
        const char *name, *shown;
        int l, h;
    } st[4] = {{"init", "1:2", 1, 2}, {"layer0", "0:2", 0, 2}, {"mean", "0:mean", 0, -1}, {"head1", "0:1", 0, 1}};
    static char prev[1 << 16];
    for (int s = 0; s < 4; s++) {
        char key[32];
        snprintf(key, sizeof key, "%s_shown", st[s].name);
        CHECK(field(dom, key, buf, sizeof buf) && strcmp(buf, st[s].shown) == 0, "%s: page shows layer:head %s (got %s)",
              st[s].name, st[s].shown, field(dom, key, buf, sizeof buf) ? buf : "nothing");
        snprintf(key, sizeof key, "%s_cells", st[s].name);
        if (!field(dom, key, buf, sizeof buf)) {
            CHECK(0, "%s: cells reported", st[s].name);
            continue;
        }
        int n = 0, bad = 0;
        for (char *c = strtok(buf, ";"); c; c = strtok(NULL, ";")) {
            int q, k;
            char rgb[64];
            if (sscanf(c, "%d,%d,%63[^\n]", &q, &k, rgb) != 3 || q < 0 || q >= T || k < 0 || k >= T) {
                bad++;
                continue;
            }
            n++;
            /* 1 level: the page rounds in double precision, the library in float */
            if (!rgb_close(parse_rgb(rgb), want(st[s].l, st[s].h, q, k), 1)) bad++;
        }
        CHECK(n == T * T && bad == 0, "%s: %d cells, %d with a colour other than viridis(w / max)", st[s].name, n, bad);
        field(dom, key, buf, sizeof buf);
        if (s) CHECK(strcmp(buf, prev) != 0, "%s: switching changed the display", st[s].name);
        snprintf(prev, sizeof prev, "%s", buf);
    }
    if (!getenv("ATTN_TEST_KEEP")) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
        if (system(cmd) != 0) fprintf(stderr, "warning: could not remove %s\n", tmpdir);
    }
    return attn_test_finish();
}
