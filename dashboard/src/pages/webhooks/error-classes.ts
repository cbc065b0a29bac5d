/**
 * What each `error_class` of a failed attempt means, for the reader of the delivery log
 * (docs/webhooks.md lists the classes).
 */
const explanations: Record<string, string> = {
  dns: "The endpoint's host name could not be resolved: check the URL's spelling and the domain's DNS records.",
  connect: 'No connection could be made to the endpoint: the server is down, or a firewall refused it.',
  tls: "The HTTPS handshake failed: the endpoint's certificate is invalid, expired or for another name.",
  timeout: 'The endpoint did not answer completely within the time allowed.',
  blocked_address:
    'The URL resolves to a private, loopback or otherwise internal address, which deliveries never reach (a protection against server-side request forgery). Use a publicly reachable address.',
  http: 'The endpoint answered with a status code other than 2xx.',
};

/** The error class in words; undefined for a class this dashboard does not know. */
export function explainErrorClass(errorClass: string): string | undefined {
  return explanations[errorClass];
}
