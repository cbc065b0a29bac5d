import { randomBytes } from 'node:crypto';
import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import { Money } from '@switchboard/runtime/money';
import { contentSecurityPolicyHeader } from '@switchboard/runtime/server';
import type { CheckoutRow } from './store/checkouts.js';
import type { Topups } from './topups.js';

/**
 * The sandbox provider's payment page (docs/api/billing.md#sandbox), `GET /v1/billing/sandbox/checkout/{token}`: the
 * amount, the status (pending, completed, expired, failed), while pending a Pay button, and a
 * link back to the dashboard's billing page. The button's form posts to `…/{token}/complete`;
 * its inline script does the same with fetch() and shows the outcome in place. The page carries its own strict CSP (contentSecurityPolicyHeader):
 * nothing loads but the nonce'd inline script and style of this very answer, the only connection
 * is back to the gateway, and the page can never be framed (the Pay button is no clickjacking
 * target). Everything interpolated into the HTML is escaped.
 */

/** The page's Content-Security-Policy for one answer's nonce. */
export function checkoutPagePolicy(nonce: string): string {
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

/** "12.5" → "12.50": top-ups have at most 2 decimals, so this is exact. */
function displayAmount(amountUsd: string): string {
  return new Money(amountUsd).toFixed(2);
}

function displayTime(date: Date): string {
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
button{width:100%;padding:12px;border:0;border-radius:8px;background:#1f6feb;color:#fff;font-size:16px;font-weight:600;cursor:pointer}
button:disabled{background:#8c959f;cursor:default}
#message{margin:16px 0 0;min-height:1.5em}
`;

/** Sends the form with fetch() and shows the answer in place of the JSON a plain form post would show. */
const script = `"use strict";
(function () {
  var form = document.getElementById("pay");
  if (!form) return;
  var button = document.getElementById("pay-button");
  var status = document.getElementById("status");
  var message = document.getElementById("message");
  function showStatus(value) {
    status.textContent = value;
    status.className = "status status-" + value;
  }
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    button.disabled = true;
    message.textContent = "Paying\\u2026";
    fetch(form.action, { method: "POST", headers: { accept: "application/json" }, credentials: "omit", cache: "no-store" })
      .then(function (response) {
        return response.json().then(
          function (body) { return { response: response, body: body }; },
          function () { return { response: response, body: null }; }
        );
      })
      .then(function (answer) {
        var body = answer.body;
        if (answer.response.ok && body && body.status === "completed") {
          showStatus(body.status);
          form.hidden = true;
          message.textContent = "Paid. " + body.amount_usd + " USD was added to the workspace balance.";
          return;
        }
        var error = body && body.error;
        var code = error && typeof error.code === "string" ? error.code : "";
        message.textContent = error && error.message ? error.message : "The payment failed (HTTP " + answer.response.status + "); try again.";
        if (code === "checkout_expired" || code === "checkout_failed") {
          showStatus(code.slice("checkout_".length));
          form.hidden = true;
        } else {
          button.disabled = false;
        }
      })
      .catch(function () {
        message.textContent = "The payment could not be sent; check the connection and try again.";
        button.disabled = false;
      });
  });
})();
`;

/**
 * Where the page's link leads back to: the dashboard's billing page (same origin as this page),
 * in the checkout's workspace, which then shows how this top-up went.
 */
export function dashboardReturnPath(row: Pick<CheckoutRow, 'id' | 'workspace_id'>): string {
  return `/app/billing?${new URLSearchParams({ workspace_id: row.workspace_id, checkout_id: row.id })}`;
}

/** The page of one checkout; `token` is the page's own (the completion URL is relative to it). */
export function renderCheckoutPage(row: CheckoutRow, token: string, nonce: string): string {
  const amount = escapeHtml(displayAmount(row.amount_usd));
  const n = escapeHtml(nonce);
  const rows = [
    `<dt>Amount</dt><dd><span id="amount">${amount}</span> USD</dd>`,
    `<dt>Status</dt><dd id="status" class="status status-${escapeHtml(row.status)}">${escapeHtml(row.status)}</dd>`,
    `<dt>Checkout</dt><dd><code>${escapeHtml(row.id)}</code></dd>`,
  ];
  if (row.status === 'pending') rows.push(`<dt>Pay before</dt><dd>${displayTime(row.expires_at)}</dd>`);
  if (row.completed_at) rows.push(`<dt>Paid</dt><dd>${displayTime(row.completed_at)}</dd>`);
  const outcome: Record<CheckoutRow['status'], string> = {
    pending: '',
    completed: 'Paid. This top-up was added to the workspace balance.',
    expired: 'This checkout expired unpaid; start a new top-up.',
    failed: 'This payment failed; start a new top-up.',
  };
  // Relative to the page, so the path alias without /v1 works too; "./" keeps it a path.
  const completeUrl = `./${encodeURIComponent(token)}/complete`;
  const pay =
    row.status === 'pending'
      ? `<form id="pay" method="post" action="${escapeHtml(completeUrl)}"><button id="pay-button" type="submit">Pay ${amount} USD</button></form>\n`
      : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>Top-up of ${amount} USD · Switchboard sandbox checkout</title>
<style nonce="${n}">${styles}</style>
</head>
<body>
<main>
<p class="sandbox">Sandbox payment: no real money moves</p>
<h1>Top-up of ${amount} USD</h1>
<dl>
${rows.join('\n')}
</dl>
${pay}<p id="message" role="status" aria-live="polite">${escapeHtml(outcome[row.status] ?? '')}</p>
<p><a id="back" href="${escapeHtml(dashboardReturnPath(row))}">Back to billing</a></p>
</main>
${pay ? `<script nonce="${n}">${script}</script>\n` : ''}</body>
</html>
`;
}

/** The GetSandboxCheckout answer: the page, with its CSP (a fresh nonce) for the gateway to send. */
export async function sandboxCheckoutPage(topups: Topups, token: string, ctx: HandlerContext): Promise<MessageInitShape<typeof HttpBodySchema>> {
  const row = await topups.sandboxCheckout(token);
  const nonce = randomBytes(18).toString('base64');
  ctx.responseHeader.set(contentSecurityPolicyHeader, checkoutPagePolicy(nonce));
  return { contentType: 'text/html; charset=utf-8', data: new TextEncoder().encode(renderCheckoutPage(row, token, nonce)) };
}
