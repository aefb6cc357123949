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
    "const NL=W.length,NH=W[0].length,L=T.length,NS='http://www.w3.org/2000/svg';\n"
    "const $=id=>document.getElementById(id),ls=$('layer'),hs=$('head'),info=$('info'),hv=$('heat'),lv=$('lines');\n"
    "for(let l=0;l<NL;l++)ls.add(new Option('layer '+l,l));\n"
    "hs.add(new Option('mean of heads','mean'));for(let h=0;h<NH;h++)hs.add(new Option('head '+h,h));\n"
    "ls.value=(IL>=0&&IL<NL)?IL:NL-1;hs.value=(IH>=0&&IH<NH)?String(IH):'mean';\n"
    "function mat(){const l=+ls.value,h=hs.value;if(h!=='mean')return W[l][+h];\n"
    " const m=[];for(let i=0;i<L;i++){m.push(new Array(L).fill(0));for(let k=0;k<NH;k++)for(let j=0;j<L;j++)m[i][j]+=W[l][k][i][j]/NH;}return m;}\n"
    "/* viridis anchors, as attn_viz.h's ATTN_CMAP_VIRIDIS */\n"
    "const V=[[68,1,84],[71,45,123],[59,82,139],[44,114,142],[33,145,140],[40,174,128],[94,201,98],[173,220,48],[253,231,37]];\n"
    "function col(t){t=t>0?Math.min(1,t):0;const p=t*(V.length-1),i=Math.min(V.length-2,Math.floor(p)),f=p-i;\n"
    " return 'rgb('+[0,1,2].map(c=>Math.round(V[i][c]+(V[i+1][c]-V[i][c])*f)).join(',')+')';}\n"
    "function el(p,tag,a,txt){const e=document.createElementNS(NS,tag);for(const k in a)e.setAttribute(k,a[k]);\n"
    " if(txt!==undefined)e.textContent=txt;p.appendChild(e);return e;}\n"
    "const mc=document.createElement('canvas').getContext('2d');mc.font='12px sans-serif';\n"
    "const lab=Math.ceil(Math.max(...T.map(t=>mc.measureText(t).width)))+8,cell=Math.max(8,Math.min(36,Math.floor(560/L)));\n"
    "let cur=null,sel=-1;\n"
    "function draw(){const m=mat();cur=m;let mx=0;for(const r of m)for(const v of r)mx=Math.max(mx,v);if(mx<=0)mx=1;\n"
    " hv.textContent='';const n=L*cell,w=lab+n+130,h=lab+n+10;hv.setAttribute('width',w);hv.setAttribute('height',h);\n"
    " const g=el(hv,'g',{});\n"
    " for(let i=0;i<L;i++)for(let j=0;j<L;j++){const r=el(g,'rect',{x:lab+j*cell,y:lab+i*cell,width:cell,height:cell,\n"
    "  fill:col(m[i][j]/mx),'class':'cell','data-q':i,'data-k':j,'shape-rendering':'crispEdges'});\n"
    "  r.onmouseenter=()=>{info.textContent='query '+i+' \\u201c'+T[i]+'\\u201d \\u2192 key '+j+' \\u201c'+T[j]+'\\u201d: '+m[i][j].toFixed(4);drawLines(i);};}\n"
    " for(let i=0;i<L;i++)el(hv,'text',{x:lab-4,y:lab+i*cell+cell/2,'text-anchor':'end','dominant-baseline':'central','class':'row'},T[i]);\n"
    " for(let j=0;j<L;j++)el(hv,'text',{transform:'translate('+(lab+j*cell+cell/2)+','+(lab-4)+') rotate(-90)',\n"
    "  'dominant-baseline':'central','class':'col'},T[j]);\n"
    " const bx=lab+n+16,defs=el(hv,'defs',{}),gr=el(defs,'linearGradient',{id:'cbar',x1:0,y1:1,x2:0,y2:0});\n"
    " V.forEach((c,k)=>el(gr,'stop',{offset:k/(V.length-1),'stop-color':'rgb('+c.join(',')+')'}));\n"
    " el(hv,'rect',{x:bx,y:lab,width:14,height:n,fill:'url(#cbar)',stroke:'#404040'});\n"
    " [[mx,0],[mx/2,n/2],[0,n]].forEach(([v,y])=>{el(hv,'line',{x1:bx+14,x2:bx+19,y1:lab+y,y2:lab+y,stroke:'#404040'});\n"
    "  el(hv,'text',{x:bx+22,y:lab+y,'dominant-baseline':'central','class':'tick'},+v.toPrecision(3)+'');});\n"
    " drawLines(-1);document.body.dataset.shown=ls.value+':'+hs.value;}\n"
    "function drawLines(s){sel=s;const m=cur,rowh=20,w=460;lv.textContent='';lv.setAttribute('width',w);lv.setAttribute('height',L*rowh+10);\n"
    " for(let i=0;i<L;i++){if(s>=0&&i!==s)continue;for(let j=0;j<L;j++){const a=m[i][j];if(a<0.005)continue;\n"
    "  el(lv,'line',{x1:150,y1:i*rowh+15,x2:310,y2:j*rowh+15,stroke:'rgb(30,90,200)','stroke-opacity':Math.min(1,a),'stroke-width':s>=0?2:1.2});}}\n"
    " for(let i=0;i<L;i++){const q=el(lv,'text',{x:140,y:i*rowh+15,'text-anchor':'end','dominant-baseline':'central','class':'q',\n"
    "  fill:i===s?'#c00':'#000'},T[i]);q.onmouseenter=()=>drawLines(i);\n"
    "  el(lv,'text',{x:320,y:i*rowh+15,'dominant-baseline':'central','class':'k'},T[i]);}}\n"
    "lv.onmouseleave=()=>drawLines(-1);\n"
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
          "select{font-size:14px;margin-right:8px}#info{height:1.4em;color:#333}svg text{font:12px sans-serif}"
          "#lines text{font-size:13px}</style></head><body>\n<h2>",
          f);
    attn__html_text(f, title ? title : "attention");
    fputs("</h2>\n<div><select id=\"layer\"></select><select id=\"head\"></select></div>\n"
          "<p id=\"info\">hover a cell to read its weight (rows: queries, columns: keys)</p>\n"
          "<div id=\"wrap\"><svg id=\"heat\" xmlns=\"http://www.w3.org/2000/svg\"></svg>"
          "<svg id=\"lines\" xmlns=\"http://www.w3.org/2000/svg\"></svg></div>\n<script>\nconst T=[",
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
