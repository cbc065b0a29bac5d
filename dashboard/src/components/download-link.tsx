import { type ReactNode, useEffect, useState } from 'react';

/**
 * A link that saves `text` as the file `filename`, from memory (a Blob's object URL): nothing
 * goes through the server. The URL is released when the link goes away.
 */
export function DownloadLink({ filename, text, type = 'text/plain', children }: { filename: string; text: string; type?: string; children: ReactNode }) {
  const [url, setUrl] = useState<string>();
  useEffect(() => {
    const objectUrl = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }));
    setUrl(objectUrl);
    return () => URL.revokeObjectURL(objectUrl);
  }, [text, type]);
  if (!url) return null;
  return (
    <a className="button" href={url} download={filename}>
      {children}
    </a>
  );
}
