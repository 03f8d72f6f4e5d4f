import Agent
import CStartup
import Glibc
import IdleCore
import Platform

CommandMain.run("xidlelock") {
    switch try Invocation.parse(Array(CommandLine.arguments.dropFirst()), sources: .thisMachine) {
    case .help(let text):
        return CommandMain.say(text)
    case .version:
        return CommandMain.say("xidlelock \(Invocation.versionNumber)")
    case .completions(let shell):
        return CommandMain.say(Completions.script(for: shell))
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
