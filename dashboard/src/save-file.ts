/**
 * Saves `text` as the file `filename` from memory: a Blob's object URL clicked as a download link
 * (what `DownloadLink` renders, for a file fetched on demand with the session).
 */
export function saveFile(filename: string, text: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }));
  const link = document.createElement('a');
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  // The download has started from the URL by now; released a little later all the same.
  setTimeout(() => URL.revokeObjectURL(url), 30_000);
}
