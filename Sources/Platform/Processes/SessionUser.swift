import Glibc
import IdleCore

/// A session's user, from the passwd and group databases (root's files).
package struct SessionUser {
    package var name: String
    package var uid: uid_t
    package var gid: gid_t
    package var home: String
    package var shell: String
    package var groups: [gid_t]

    package init?(uid: UInt32) {
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 16384)
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil, let name = entry.pw_name else { return nil }
        self.name = String(cString: name)
        self.uid = uid
        gid = entry.pw_gid
        home = entry.pw_dir.map { String(cString: $0) } ?? "/"
        shell = entry.pw_shell.map { String(cString: $0) } ?? "/bin/sh"
        var count: Int32 = 64
        var list = [gid_t](repeating: 0, count: 64)
        if getgrouplist(name, gid, &list, &count) < 0 {
            list = [gid_t](repeating: 0, count: Int(count))
            _ = getgrouplist(name, gid, &list, &count)
        }
        groups = Array(list.prefix(Int(max(count, 0))))
    }

    /// The system's directories: the clean environment's PATH, and where the policy's
    /// locker is looked for, never the user's PATH (a `~/bin/i3lock` first in it must not
    /// stand in for the admin's).
    package static let systemPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    package var credentials: SpawnRequest.User { SpawnRequest.User(uid: uid, gid: gid, groups: groups, home: home) }

    /// A clean environment for the session's locker, under the admin's policy (the
    /// guard's locker, the agent's): the session's display and what logind and passwd
    /// say, the system's PATH, nothing the user set (no LD_*, no PATH of theirs, no
    /// locker settings such as XSECURELOCK_*).
    package func lockerEnvironment(display: String, sessionID: String?, xauthority: String?, lang: String? = nil) -> [String] {
        var env = ["DISPLAY=\(display)", "HOME=\(home)", "USER=\(name)", "LOGNAME=\(name)", "SHELL=\(shell)",
                   "PATH=\(SessionUser.systemPath)", "LANG=\(lang ?? "C.UTF-8")",
                   "XDG_SESSION_TYPE=x11", "XDG_RUNTIME_DIR=/run/user/\(uid)"]
        if let sessionID { env.append("XDG_SESSION_ID=\(sessionID)") }
        if let xauthority { env.append("XAUTHORITY=\(xauthority)") }
        return env
    }
}
