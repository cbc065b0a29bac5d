import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import { contentSecurityPolicyHeader } from '@switchboard/runtime/server';
import { checkoutPagePolicy, escapeHtml } from './checkout-page.js';
import type { PaymentMethods } from './payment-methods.js';
import type { SetupRow } from './store/payment-methods.js';

/**
 * The sandbox provider's card page (docs/api/billing.md#sandbox-payment-methods), `GET /v1/billing/sandbox/setup/{token}`:
 * while pending, one button per test card ("4242" pays, "0341" is declined at every charge), each
 * a form posting to `…/{token}/complete`; the inline script sends the chosen card as JSON and
 * shows the saved card in place. Without script only the default card's form works (a form can
 * post no JSON; its empty body saves 4242), so the 0341 button is a plain button the script
 * drives. Same
 * strict CSP as the checkout page: nothing loads but this answer's nonce'd script and style, and
 * the page cannot be framed. Everything interpolated is escaped.
 */

const styles = `
:root{color-scheme:light;font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1f2328;background:#f6f8fa}
body{margin:0;min-height:100vh;display:flex;align-items:center;justify-content:center}
main{background:#fff;border:1px solid #d0d7de;border-radius:12px;padding:32px;width:min(420px,calc(100vw - 32px));box-sizing:border-box}
.sandbox{display:inline-block;margin:0 0 16px;padding:2px 10px;border-radius:999px;background:#fff8c5;color:#7d4e00;font-size:13px}
h1{margin:0 0 20px;font-size:22px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:8px 16px;margin:0 0 24px}
dt{color:#59636e}dd{margin:0;overflow-wrap:anywhere}
.status{font-weight:600}.status-pending{color:#9a6700}.status-completed{color:#1a7f37}.status-expired{color:#cf222e}
form{margin:0 0 12px}
button{width:100%;padding:12px;border:0;border-radius:8px;background:#1f6feb;color:#fff;font-size:16px;font-weight:600;cursor:pointer}
button.decline{background:#6e7781}
button:disabled{background:#8c959f;cursor:default}
#message{margin:16px 0 0;min-height:1.5em}
`;

const script = `"use strict";
(function () {
  var forms = document.querySelectorAll("form.card");
  var status = document.getElementById("status");
  var message = document.getElementById("message");
  function setDisabled(value) {
    for (var i = 0; i < forms.length; i++) forms[i].querySelector("button").disabled = value;
  }
  function hideForms() {
    for (var i = 0; i < forms.length; i++) forms[i].hidden = true;
  }
  Array.prototype.forEach.call(forms, function (form) {
    function save(event) {
      event.preventDefault();
      setDisabled(true);
      message.textContent = "Saving\\u2026";
      fetch(form.action, {
        method: "POST",
        headers: { accept: "application/json", "content-type": "application/json" },
        body: JSON.stringify({ card: form.getAttribute("data-card") }),
        credentials: "omit",
        cache: "no-store"
      })
        .then(function (response) {
          return response.json().then(
            function (body) { return { response: response, body: body }; },
            function () { return { response: response, body: null }; }
          );
        })
        .then(function (answer) {
          var body = answer.body;
          if (answer.response.ok && body && body.payment_method_id) {
            status.textContent = "completed";
            status.className = "status status-completed";
            hideForms();
            message.textContent = "Saved: " + body.brand + " ending in " + body.last4 + ".";
            return;
          }
          var error = body && body.error;
          message.textContent = error && error.message ? error.message : "Saving failed (HTTP " + answer.response.status + "); try again.";
          if (error && error.code === "setup_expired") {
            status.textContent = "expired";
            status.className = "status status-expired";
            hideForms();
          } else {
            setDisabled(false);
          }
        })
        .catch(function () {
          message.textContent = "The card could not be sent; check the connection and try again.";
          setDisabled(false);
        });
    }
    form.addEventListener("submit", save);
    form.querySelector("button").addEventListener("click", save);
  });
})();
`;

function displayTime(date: Date): string {
  return `<time datetime="${escapeHtml(date.toISOString())}">${escapeHtml(`${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`)}</time>`;
}

/** The page of one setup; `token` is the page's own (the completion URL is relative to it). */
export function renderSetupPage(row: SetupRow, token: string, nonce: string): string {
  const n = escapeHtml(nonce);
  const rows = [
    `<dt>Status</dt><dd id="status" class="status status-${escapeHtml(row.status)}">${escapeHtml(row.status)}</dd>`,
    `<dt>Setup</dt><dd><code>${escapeHtml(row.id)}</code></dd>`,
  ];
  if (row.status === 'pending') rows.push(`<dt>Save before</dt><dd>${displayTime(row.expires_at)}</dd>`);
  const outcome: Record<SetupRow['status'], string> = {
    pending: '',
    completed: 'A card was saved with this page.',
    expired: 'This page expired before a card was saved; start a new one.',
  };
  const completeUrl = escapeHtml(`./${encodeURIComponent(token)}/complete`);
  const cards =
    row.status === 'pending'
      ? [
          `<form class="card" data-card="4242" method="post" action="${completeUrl}"><button type="submit">Save test card 4242 (charges succeed)</button></form>`,
          `<form class="card" data-card="0341" method="post" action="${completeUrl}"><button class="decline" type="button">Save test card 0341 (charges are declined)</button></form>`,
        ].join('\n')
      : '';
  const back = `/app/billing?${new URLSearchParams({ workspace_id: row.workspace_id, setup_id: row.id })}`;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Save a card · Switchboard sandbox</title>
<style nonce="${n}">${styles}</style>
</head>
<body>
<main>
<p class="sandbox">Sandbox: test cards only, no real card is involved</p>
<h1>Save a card for auto top-up</h1>
<dl>
${rows.join('\n')}
</dl>
${cards ? `${cards}\n` : ''}<p id="message" role="status" aria-live="polite">${escapeHtml(outcome[row.status] ?? '')}</p>
<p><a id="back" href="${escapeHtml(back)}">Back to billing</a></p>
</main>
${cards ? `<script nonce="${n}">${script}</script>\n` : ''}</body>
</html>
`;
}

/** The GetSandboxSetup answer: the page, with its CSP (a fresh nonce) for the gateway to send. */
export async function sandboxSetupPage(methods: PaymentMethods, token: string, ctx: HandlerContext): Promise<MessageInitShape<typeof HttpBodySchema>> {
  const row = await methods.sandboxSetup(token);
  const nonce = randomBytes(18).toString('base64');
  ctx.responseHeader.set(contentSecurityPolicyHeader, checkoutPagePolicy(nonce));
  return { contentType: 'text/html; charset=utf-8', data: new TextEncoder().encode(renderSetupPage(row, token, nonce)) };
}
