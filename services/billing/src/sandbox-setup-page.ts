import type { MessageInitShape } from '@bufbuild/protobuf';
import type { HandlerContext } from '@connectrpc/connect';
import type { HttpBodySchema } from '@switchboard/contracts/google/api/httpbody_pb';
import type { PaymentMethods } from './payment-methods.js';
import { displayTime, escapeHtml, renderSandboxPage, sandboxPageAnswer } from './sandbox-page.js';
import type { SetupRow } from './store/payment-methods.js';

/**
 * The sandbox provider's card page (docs/api/billing.md#sandbox-payment-methods), `GET /v1/billing/sandbox/setup/{token}`:
 * while pending, one button per test card ("4242" pays, "0341" is declined at every charge), each
 * a form posting to `…/{token}/complete`; the inline script sends the chosen card as JSON and
 * shows the saved card in place. Without script only the default card's form works (a form can
 * post no JSON; its empty body saves 4242), so the 0341 button is a plain button the script
 * drives. The frame, the look and the strict CSP are every sandbox page's (sandbox-page.ts).
 */

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

/** The page of one setup; `token` is the page's own (the completion URL is relative to it). */
export function renderSetupPage(row: SetupRow, token: string, nonce: string): string {
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
  return renderSandboxPage(
    {
      title: 'Save a card · Switchboard sandbox',
      banner: 'Sandbox: test cards only, no real card is involved',
      heading: 'Save a card for auto top-up',
      rows,
      actions: cards,
      message: outcome[row.status] ?? '',
      back,
      script,
    },
    nonce,
  );
}

/** The GetSandboxSetup answer: the page, with its CSP (a fresh nonce) for the gateway to send. */
export async function sandboxSetupPage(methods: PaymentMethods, token: string, ctx: HandlerContext): Promise<MessageInitShape<typeof HttpBodySchema>> {
  const row = await methods.sandboxSetup(token);
  return sandboxPageAnswer(ctx, (nonce) => renderSetupPage(row, token, nonce));
}
