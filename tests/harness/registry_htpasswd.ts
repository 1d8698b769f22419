/**
 * Fixed Basic-auth credentials for the test registry. distribution's htpasswd backend needs a
 * bcrypt hash; no bcrypt tool or library is available to Deno here, so the hash is computed once
 * and kept as a constant. It was made with the system crypt(3) (libxcrypt's bcrypt):
 *   perl -e 'print crypt("cocoon-basic-password", "\$2y\$05\$Q2NvY29vbnRlc3RzYWx0MA")'
 * (cost 5 keeps registry logins fast; the password protects nothing outside tests).
 */

/** Username accepted by the basic-auth registry. */
export const BASIC_USER = "cocoon";
/** Password accepted by the basic-auth registry. */
export const BASIC_PASSWORD = "cocoon-basic-password";
/** htpasswd line for BASIC_USER / BASIC_PASSWORD. */
export const BASIC_HTPASSWD =
  `${BASIC_USER}:$2y$05$Q2NvY29vbnRlc3RzYWx0M.tMKXWpAFt7WeqYXcTsKPB1RCNz5OO62\n`;
