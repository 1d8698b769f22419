/** Which remote-access protocol a VM is reached by. */
import {
  ConnTypeADB,
  ConnTypeRDP,
  ConnTypeSSH,
  ConnTypeVNC,
  OSAndroid,
  OSWindows,
} from "../apis/v1/enums.ts";

/**
 * The connection protocol: a non-empty override wins; otherwise a VNC port means vnc, android
 * means adb, windows means rdp, and anything else ssh.
 */
export function connectionType(osType: string, hasVNCPort: boolean, override: string): string {
  if (override !== "") return override;
  if (hasVNCPort) return ConnTypeVNC;
  if (osType === OSAndroid) return ConnTypeADB;
  if (osType === OSWindows) return ConnTypeRDP;
  return ConnTypeSSH;
}
