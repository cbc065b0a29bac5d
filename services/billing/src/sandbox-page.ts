import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import { contentSecurityPolicyHeader } from '@switchboard/runtime/server';

/**
 * What the sandbox provider's pages share (docs/api/billing.md#sandbox): the frame of the page,
 * its look, and its strict CSP. Nothing loads but the nonce'd inline script and style of the very
 * answer, the only connection is back to the gateway, and the page can never be framed (its
 * buttons are no clickjacking target). Everything interpolated into the HTML is escaped.
 */

/** The page's Content-Security-Policy for one answer's nonce. */
export function sandboxPagePolicy(nonce: string): string {
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "connect-src 'self'",
    "form-action 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
  ].join('; ');
}

const htmlEscapes: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** Text safe inside HTML content and quoted attribute values. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (char) => htmlEscapes[char]);
}

/** A time as the page shows it: minutes, UTC. */
export function displayTime(date: Date): string {
  return `<time datetime="${escapeHtml(date.toISOString())}">${escapeHtml(`${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`)}</time>`;
}

const styles = `
:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa}
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center}
main{background:#fff;border:1px solid #d0d7de;border-radius:12px;padding:32px;width:min(420px,calc(100vw - 32px));box-sizing:border-box}
.sandbox{display:inline-block;margin:0 0 16px;padding:2px 10px;border-radius:999px;background:#fff8c5;color:#7d4e00;font-size:13px}
h1{margin:0 0 20px;font-size:22px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:8px 16px;margin:0 0 24px}
dt{color:#59636e}dd{margin:0;overflow-wrap:anywhere}
.status{font-weight:600}.status-pending{color:#9a6700}.status-completed{color:#1a7f37}.status-expired,.status-failed{color:#cf222e}
form{margin:0 0 12px}
button{width:100%;padding:12px;border:0;border-radius:8px;background:#1f6feb;color:#fff;font-size:16px;font-weight:600;cursor:pointer}
button.decline{background:#6e7781}
button:disabled{background:#8c959f;cursor:default}
#message{margin:16px 0 0;min-height:1.5em}
`;

/** One page; every string but `rows`, `actions` and `script` (HTML and code of ours) is escaped here. */
export interface SandboxPage {
  title: string;
  /** The badge saying no real money or card is involved. */
  banner: string;
  heading: string;
  /** `<dt>…</dt><dd>…</dd>` pairs, their values escaped by the caller. */
  rows: string[];
  /** The forms of the page's buttons; empty when nothing is left to do. */
  actions: string;
  /** What happened, in words (the script replaces it). */
  message: string;
  /** The dashboard's billing page, on this origin. */
  back: string;
  /** Sent only with the actions. */
  script: string;
}

export function renderSandboxPage(page: SandboxPage, nonce: string): string {
  const n = escapeHtml(nonce);
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${escapeHtml(page.title)}</title>
<style nonce="${n}">${styles}</style>
</head>
<body>
<main>
<p class="sandbox">${escapeHtml(page.banner)}</p>
<h1>${escapeHtml(page.heading)}</h1>
<dl>
${page.rows.join('\n')}
</dl>
${page.actions ? `${page.actions}\n` : ''}<p id="message" role="status" aria-live="polite">${escapeHtml(page.message)}</p>
<p><a id="back" href="${escapeHtml(page.back)}">Back to billing</a></p>
</main>
${page.actions ? `<script nonce="${n}">${page.script}</script>\n` : ''}</body>
</html>
`;
}

/** The HttpBody answer of a page, with its CSP (a fresh nonce) for the gateway to send. */
export function sandboxPageAnswer(ctx: HandlerContext, render: (nonce: string) => string): MessageInitShape<typeof HttpBodySchema> {
  const nonce = randomBytes(18).toString('base64');
  ctx.responseHeader.set(contentSecurityPolicyHeader, sandboxPagePolicy(nonce));
  return { contentType: 'text/html; charset=utf-8', data: new TextEncoder().encode(render(nonce)) };
}
