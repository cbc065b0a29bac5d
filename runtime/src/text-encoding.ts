import { configureTextEncoding } from '@bufbuild/protobuf/wire';

/**
 * protobuf-es decodes strings with a default TextDecoder, which drops a leading U+FEFF: a message
 * whose content starts with a byte-order mark would lose it between the gateway and the service.
 * These decoders keep every character as sent. Configured once per process (runService and the
 * gateway call it before anything is decoded).
 */
export function keepByteOrderMarks(): void {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder('utf-8', { ignoreBOM: true });
  const strictDecoder = new TextDecoder('utf-8', { ignoreBOM: true, fatal: true });
  configureTextEncoding({
    encodeUtf8: (text) => encoder.encode(text),
    decodeUtf8: (bytes, strict) => (strict ? strictDecoder : decoder).decode(bytes),
    checkUtf8: (text) => {
      try {
        encodeURIComponent(text);
        return true;
      } catch {
        return false;
      }
    },
  });
}
