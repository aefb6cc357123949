/* Self-contained interactive attention viewer (see attn_viz_html.h). */
#include "attn_viz_html.h"
#include "attn_io.h"
#include "core/internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Write s as the body of a JS string literal inside HTML: escapes quotes, backslashes,
 * control characters and '<' (so "</script>" cannot close the script element). */
static void attn__js_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        unsigned c = *p;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<' || c == '>' || c == '&' || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc((int)c, f);
    }
    fputc('"', f);
}

static void attn__html_text(FILE *f, const char *s) {
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*p, f);
        }
    }
}

static const char *attn__viewer_js =
    "const NL=W.length,NH=W[0].length,L=T.length;\n"
    "const ls=document.getElementById('layer'),hs=document.getElementById('head');\n"
    "for(let l=0;l<NL;l++)ls.add(new Option('layer '+l,l));\n"
    "hs.add(new Option('mean of heads','mean'));for(let h=0;h<NH;h++)hs.add(new Option('head '+h,h));\n"
    "ls.value=(IL>=0&&IL<NL)?IL:NL-1;hs.value=(IH>=0&&IH<NH)?String(IH):'mean';\n"
    "function mat(){const l=+ls.value,h=hs.value;if(h!=='mean')return W[l][+h];\n"
    " const m=[];for(let i=0;i<L;i++){m.push(new Array(L).fill(0));for(let k=0;k<NH;k++)for(let j=0;j<L;j++)m[i][j]+=W[l][k][i][j]/NH;}return m;}\n"
    "const V=[[68,1,84],[72,40,120],[62,74,137],[49,104,142],[38,130,142],[31,158,137],[53,183,121],[109,205,89],[180,222,44],[253,231,37]];\n"
    "function col(t){t=Math.max(0,Math.min(1,t))*(V.length-1);const i=Math.min(V.length-2,Math.floor(t)),f=t-i;\n"
    " return 'rgb('+[0,1,2].map(c=>Math.round(V[i][c]+(V[i+1][c]-V[i][c])*f)).join(',')+')';}\n"
    "const cv=document.getElementById('heat'),cx=cv.getContext('2d'),info=document.getElementById('info');\n"
    "const cell=Math.max(8,Math.min(36,Math.floor(560/L))),pad=8;let lab=0;\n"
    "function draw(){const m=mat();cx.font='12px sans-serif';lab=Math.ceil(Math.max(...T.map(t=>cx.measureText(t).width))+pad);\n"
    " cv.width=lab+L*cell+90;cv.height=lab+L*cell+10;cx.font='12px sans-serif';cx.fillStyle='#fff';cx.fillRect(0,0,cv.width,cv.height);\n"
    " let mx=0;for(const r of m)for(const v of r)mx=Math.max(mx,v);if(mx<=0)mx=1;\n"
    " for(let i=0;i<L;i++)for(let j=0;j<L;j++){cx.fillStyle=col(m[i][j]/mx);cx.fillRect(lab+j*cell,lab+i*cell,cell,cell);}\n"
    " cx.fillStyle='#000';cx.textBaseline='middle';cx.textAlign='right';\n"
    " for(let i=0;i<L;i++)cx.fillText(T[i],lab-4,lab+i*cell+cell/2);\n"
    " for(let j=0;j<L;j++){cx.save();cx.translate(lab+j*cell+cell/2,lab-4);cx.rotate(-Math.PI/2);cx.textAlign='left';cx.fillText(T[j],0,0);cx.restore();}\n"
    " const bx=lab+L*cell+20,bh=L*cell;for(let y=0;y<bh;y++){cx.fillStyle=col(1-y/bh);cx.fillRect(bx,lab+y,16,1);}\n"
    " cx.textAlign='left';cx.fillStyle='#000';cx.fillText(mx.toPrecision(3),bx+20,lab+6);cx.fillText('0',bx+20,lab+bh-6);\n"
    " drawLines(m,-1);}\n"
    "cv.onmousemove=e=>{const r=cv.getBoundingClientRect(),x=e.clientX-r.left-lab,y=e.clientY-r.top-lab;\n"
    " const i=Math.floor(y/cell),j=Math.floor(x/cell);if(i>=0&&j>=0&&i<L&&j<L){const m=mat();\n"
    " info.textContent='query '+i+' \\u201c'+T[i]+'\\u201d \\u2192 key '+j+' \\u201c'+T[j]+'\\u201d: '+m[i][j].toFixed(4);}};\n"
    "const lv=document.getElementById('lines'),lx=lv.getContext('2d');\n"
    "function drawLines(m,sel){const rowh=20,w=460;lv.width=w;lv.height=L*rowh+10;lx.font='13px sans-serif';\n"
    " lx.clearRect(0,0,w,lv.height);lx.textBaseline='middle';\n"
    " for(let i=0;i<L;i++){if(sel>=0&&i!==sel)continue;for(let j=0;j<L;j++){const a=m[i][j];if(a<0.005)continue;\n"
    "  lx.strokeStyle='rgba(30,90,200,'+Math.min(1,a*(sel>=0?1:0.9))+')';lx.lineWidth=sel>=0?2:1.2;\n"
    "  lx.beginPath();lx.moveTo(150,i*rowh+15);lx.lineTo(310,j*rowh+15);lx.stroke();}}\n"
    " lx.fillStyle='#000';for(let i=0;i<L;i++){lx.textAlign='right';lx.fillStyle=i===sel?'#c00':'#000';lx.fillText(T[i],140,i*rowh+15);\n"
    "  lx.textAlign='left';lx.fillStyle='#000';lx.fillText(T[i],320,i*rowh+15);}}\n"
    "lv.onmousemove=e=>{const r=lv.getBoundingClientRect(),i=Math.floor((e.clientY-r.top-5)/20);\n"
    " if(e.clientX-r.left<160&&i>=0&&i<L)drawLines(mat(),i);else drawLines(mat(),-1);};\n"
    "lv.onmouseleave=()=>drawLines(mat(),-1);\n"
    "ls.onchange=draw;hs.onchange=draw;draw();\n";

int attn_attention_html(const char *path, const attn_tensor *w, const char *const *tokens, const char *title,
                        int64_t init_layer, int64_t init_head) {
    if (!path || !w || !tokens) return attn_set_error(ATTN_E_INVALID, "attention_html: NULL argument");
    if (w->dtype != ATTN_F32) return attn_set_error(ATTN_E_DTYPE, "attention_html: weights must be float32");
    if (w->ndim != 4 || w->shape[2] != w->shape[3])
        return attn_set_error(ATTN_E_SHAPE, "attention_html: weights must be [n_layers, H, L, L]");
    int64_t NL = w->shape[0], H = w->shape[1], L = w->shape[2];
    if (NL < 1 || H < 1 || L < 1) return attn_set_error(ATTN_E_INVALID, "attention_html: empty weights");
    for (int64_t a = 0; a < NL; a++)
        for (int64_t b = 0; b < H; b++)
            for (int64_t i = 0; i < L; i++)
                for (int64_t j = 0; j < L; j++)
                    if (!isfinite(*attn__f32_at4(w, a, b, i, j)))
                        return attn_set_error(ATTN_E_RANGE, "attention_html: weight [%lld, %lld, %lld, %lld] is not finite",
                                              (long long)a, (long long)b, (long long)i, (long long)j);
    attn_out *out;
    if (attn_out_open(&out, path, ATTN_OUT_TEXT) < 0) return ATTN_E_IO;
    FILE *f = attn_out_file(out);
    fputs("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>", f);
    attn__html_text(f, title ? title : "attention");
    fputs("</title>\n<style>body{font-family:sans-serif;margin:20px}#wrap{display:flex;gap:30px;align-items:flex-start}"
          "select{font-size:14px;margin-right:8px}#info{height:1.4em;color:#333}</style></head><body>\n<h2>",
          f);
    attn__html_text(f, title ? title : "attention");
    fputs("</h2>\n<div><select id=\"layer\"></select><select id=\"head\"></select></div>\n"
          "<p id=\"info\">hover a cell to read its weight (rows: queries, columns: keys)</p>\n"
          "<div id=\"wrap\"><canvas id=\"heat\"></canvas><canvas id=\"lines\"></canvas></div>\n<script>\nconst T=[",
          f);
    for (int64_t i = 0; i < L; i++) {
        if (i) fputc(',', f);
        attn__js_str(f, tokens[i]);
    }
    fputs("];\nconst W=[", f);
    for (int64_t a = 0; a < NL; a++) {
        fputs(a ? ",[" : "[", f);
        for (int64_t b = 0; b < H; b++) {
            fputs(b ? ",[" : "[", f);
            for (int64_t i = 0; i < L; i++) {
                fputs(i ? ",[" : "[", f);
                for (int64_t j = 0; j < L; j++) fprintf(f, j ? ",%.4g" : "%.4g", (double)*attn__f32_at4(w, a, b, i, j));
                fputc(']', f);
            }
            fputc(']', f);
        }
        fputc(']', f);
    }
    fputs("];\n", f);
    fprintf(f, "const IL=%lld,IH=%lld;\n", (long long)(init_layer >= 0 && init_layer < NL ? init_layer : -1),
            (long long)(init_head >= 0 && init_head < H ? init_head : -1));
    fputs(attn__viewer_js, f);
    fputs("</script>\n</body></html>\n", f);
    return attn_out_commit(out); /* write errors are reported with their reason */
}
