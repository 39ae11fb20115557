/** Checks an outbound URL we will call with credentials: https (unless allowed), no userinfo. */
export function checkOutboundUrl(text: string, allowInsecure: boolean): string | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  if (url.protocol !== 'https:' && !(allowInsecure && url.protocol === 'http:')) {
    return allowInsecure ? 'must use http or https' : 'must use https';
  }
  if (url.username || url.password) return 'must not contain credentials';
  if (url.hash) return 'must not contain a fragment';
  return null;
}
