@testable import Agent
import Platform
import Glibc
import Testing

/// Without --locker, the first installed of xsecurelock, i3lock -n and slock; on a VNC
/// server not xsecurelock, which refuses to lock there (exit 1 at every try).
@Suite struct LockerChoiceTests {
    /// A directory holding executables of these names, for the choice's PATH.
    func installed(_ programs: [String]) throws -> String {
        var template = Array("/tmp/xidlelock-lockers-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        for program in programs {
            let fd = open("\(directory)/\(program)", O_WRONLY | O_CREAT, 0o755)
            try #require(fd >= 0)
            close(fd)
        }
        return directory
    }

    @Test("xsecurelock first where it is installed; on a VNC server the next one installed")
    func vncSkipsXsecurelock() throws {
        let all = try installed(["xsecurelock", "i3lock", "slock"])
        #expect(try LockerChoice.choose(given: nil, path: all) == "xsecurelock")
        #expect(try LockerChoice.choose(given: nil, path: all, vncServer: true) == "i3lock -n")
        let only = try installed(["xsecurelock"])
        #expect(throws: AgentError.self) { try LockerChoice.choose(given: nil, path: only, vncServer: true) }
        // A locker the user names is theirs to choose, VNC or not.
        #expect(try LockerChoice.choose(given: "xsecurelock", path: all, vncServer: true) == "xsecurelock")
    }
}
