import Glibc
import IdleCore

/// A session's user, from the passwd and group databases (root's files).
struct SessionUser {
    var name: String
    var uid: uid_t
    var gid: gid_t
    var home: String
    var shell: String
    var groups: [gid_t]

    init?(uid: UInt32) {
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

    var credentials: SpawnRequest.User { SpawnRequest.User(uid: uid, gid: gid, groups: groups, home: home) }

    /// A clean environment for the session's locker, under the admin's policy (the
    /// guard's locker, the agent's): the session's display and what logind and passwd
    /// say, the system's PATH, nothing the user set (no LD_*, no PATH of theirs, no
    /// locker settings such as XSECURELOCK_*).
    func lockerEnvironment(display: String, sessionID: String?, xauthority: String?, lang: String? = nil) -> [String] {
        var env = ["DISPLAY=\(display)", "HOME=\(home)", "USER=\(name)", "LOGNAME=\(name)", "SHELL=\(shell)",
                   "PATH=\(LockerChoice.systemPath)", "LANG=\(lang ?? "C.UTF-8")",
                   "XDG_SESSION_TYPE=x11", "XDG_RUNTIME_DIR=/run/user/\(uid)"]
        if let sessionID { env.append("XDG_SESSION_ID=\(sessionID)") }
        if let xauthority { env.append("XAUTHORITY=\(xauthority)") }
        return env
    }
}
