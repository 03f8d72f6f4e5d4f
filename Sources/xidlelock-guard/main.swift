import Glibc
import IdleCore
import Platform
import SessionGuard

// `xidlelock-guard`: root's daemon, also what `xidlelock guard` execs. Its flags are
// `xidlelock guard`'s, parsed by the same code.

func emit(_ text: String, to fd: Int32) {
    var text = text
    text.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}

StandardStreams.ensureOpen()

let status: Int32
do {
    let arguments = Array(CommandLine.arguments.dropFirst())
    switch arguments == ["--version"] ? .version : try GuardOptions.parse(arguments[...]) {
    case .help(let text):
        emit(text.hasSuffix("\n") ? text : text + "\n", to: 1)
        status = 0
    case .version:
        emit("xidlelock-guard \(Invocation.versionNumber)\n", to: 1)
        status = 0
    case .sessionGuard(let options):
        status = try GuardService.run(options)
    default:
        throw UsageError("xidlelock-guard takes only `xidlelock guard`'s options")
    }
} catch let error as UsageError {
    emit("xidlelock-guard: error: \(error.message)\n", to: 2)
    status = 64
} catch let error as AgentError {
    emit("xidlelock-guard: error: \(error.message)\n", to: 2)
    status = error.exitStatus
} catch {
    emit("xidlelock-guard: error: \(error)\n", to: 2)
    status = 1
}
exit(status)
