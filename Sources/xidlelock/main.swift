import Agent
import CStartup
import Glibc
import IdleCore
import Platform

CommandMain.run("xidlelock") {
    switch try Invocation.parse(Array(CommandLine.arguments.dropFirst()), sources: .thisMachine) {
    case .help(let text):
        CommandMain.emit(text.hasSuffix("\n") ? text : text + "\n", to: 1)
        return 0
    case .version:
        CommandMain.emit("xidlelock \(Invocation.versionNumber)\n", to: 1)
        return 0
    case .completions(let shell):
        CommandMain.emit(Completions.script(for: shell), to: 1)
        return 0
    case .doctor(let options):
        return try DoctorCommand.run(options)
    case .idle(let format):
        try IdleQuery.run(format)
        return 0
    case .client(let command):
        return try ControlClient.run(command)
    case .sessionGuard(let options):
        try GuardDaemon.exec(options)
    case .agent(let options):
        try Agent.run(options)
    }
}
