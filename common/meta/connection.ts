/** Which remote-access protocol a VM is reached by. */
import {
  CONN_TYPE_ADB,
  CONN_TYPE_RDP,
  CONN_TYPE_SSH,
  CONN_TYPE_VNC,
  OS_ANDROID,
  OS_WINDOWS,
} from "../apis/v1/enums.ts";

/**
 * The connection protocol: a non-empty override wins; otherwise a VNC port means vnc, android
 * means adb, windows means rdp, and anything else ssh.
 */
export function connectionType(osType: string, hasVNCPort: boolean, override: string): string {
  if (override !== "") return override;
  if (hasVNCPort) return CONN_TYPE_VNC;
  if (osType === OS_ANDROID) return CONN_TYPE_ADB;
  if (osType === OS_WINDOWS) return CONN_TYPE_RDP;
  return CONN_TYPE_SSH;
}
