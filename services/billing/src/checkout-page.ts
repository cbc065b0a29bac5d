import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import { Money } from '@switchboard/runtime/money';
import { displayTime, escapeHtml, renderSandboxPage, sandboxPageAnswer } from './sandbox-page.js';
import type { CheckoutRow } from './store/checkouts.js';
import type { Topups } from './topups.js';

/**
 * The sandbox provider's payment page (docs/api/billing.md#sandbox), `GET /v1/billing/sandbox/checkout/{token}`: the
 * amount, the status (pending, completed, expired, failed), while pending a Pay button, and a
 * link back to the dashboard's billing page. The button's form posts to `…/{token}/complete`;
 * its inline script does the same with fetch() and shows the outcome in place. The frame, the
 * look and the strict CSP are every sandbox page's (sandbox-page.ts).
 */

/** "12.5" → "12.50": top-ups have at most 2 decimals, so this is exact. */
function displayAmount(amountUsd: string): string {
  return new Money(amountUsd).toFixed(2);
}

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
  const amount = displayAmount(row.amount_usd);
  const rows = [
    `<dt>Amount</dt><dd><span id="amount">${escapeHtml(amount)}</span> USD</dd>`,
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
      ? `<form id="pay" method="post" action="${escapeHtml(completeUrl)}"><button id="pay-button" type="submit">Pay ${escapeHtml(amount)} USD</button></form>`
      : '';
  return renderSandboxPage(
    {
      title: `Top-up of ${amount} USD · Switchboard sandbox checkout`,
      banner: 'Sandbox payment: no real money moves',
      heading: `Top-up of ${amount} USD`,
      rows,
      actions: pay,
      message: outcome[row.status] ?? '',
      back: dashboardReturnPath(row),
      script,
    },
    nonce,
  );
}

/** The GetSandboxCheckout answer: the page, with its CSP (a fresh nonce) for the gateway to send. */
export async function sandboxCheckoutPage(topups: Topups, token: string, ctx: HandlerContext): Promise<MessageInitShape<typeof HttpBodySchema>> {
  const row = await topups.sandboxCheckout(token);
  return sandboxPageAnswer(ctx, (nonce) => renderCheckoutPage(row, token, nonce));
}
