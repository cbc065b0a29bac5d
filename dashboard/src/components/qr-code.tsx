import QRCode from 'qrcode';
import { useEffect, useState } from 'react';

/** `value` as a QR code: a PNG data: URL drawn in the browser (the secret it holds never leaves the page). */
export function QrCode({ value, alt }: { value: string; alt: string }) {
  const [src, setSrc] = useState<string>();
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    let current = true;
    QRCode.toDataURL(value, { margin: 2, width: 208, errorCorrectionLevel: 'M' }).then(
      (url) => current && setSrc(url),
      () => current && setFailed(true),
    );
    return () => {
      current = false;
    };
  }, [value]);
  if (failed) return <p className="hint">The QR code could not be drawn: type the secret below into the app instead.</p>;
  return src ? <img className="qr-code" src={src} alt={alt} width={208} height={208} /> : null;
}
