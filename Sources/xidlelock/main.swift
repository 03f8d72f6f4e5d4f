import Agent
import CStartup
import Glibc
import IdleCore
import Platform

/// Prints `text` to a file descriptor, whole.
func emit(_ text: String, to fd: Int32) {
    var text = text
    text.withUTF8 { _ = write(fd, $0.baseAddress, $0.count) }
}

// Before anything opens a descriptor: a launcher that closed 0-2 must not get the
// X connection or the lock file at fd 2, where log lines would then be written.
StandardStreams.ensureOpen()

let status: Int32
do {
    switch try Invocation.parse(Array(CommandLine.arguments.dropFirst()), sources: .thisMachine) {
    case .help(let text):
        emit(text.hasSuffix("\n") ? text : text + "\n", to: 1)
        status = 0
    case .version:
        emit("xidlelock \(Invocation.versionNumber)\n", to: 1)
        status = 0
    case .completions(let shell):
        emit(Completions.script(for: shell), to: 1)
        status = 0
    case .doctor(let options):
        status = try DoctorCommand.run(options)
    case .idle(let format):
        try IdleQuery.run(format)
        status = 0
    case .client(let command):
        status = try ControlClient.run(command)
    case .sessionGuard(let options):
        try GuardDaemon.exec(options)
    case .agent(let options):
        try Agent.run(options)
    }
} catch let error as UsageError {
    emit("xidlelock: error: \(error.message)\n", to: 2)
    status = 64
} catch let error as AgentError {
    emit("xidlelock: error: \(error.message)\n", to: 2)
    status = error.exitStatus
} catch {
    emit("xidlelock: error: \(error)\n", to: 2)
    status = 1
}
exit(status)
