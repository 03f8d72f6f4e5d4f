import Agent
import CStartup
import Glibc
import IdleCore
import Platform

// `xidlelock idle` alone, as status bars and shell loops call it many times a minute:
// straight to the query, without building the argument list and the parser's tables
// (their metadata and once-initialised globals were 28 of its 210 page faults at
// start). The parser gives the same `.idle(.ms)` (InvocationTests).
var argumentCount: Int32 = 0
let arguments = xil_startup_arguments(&argumentCount)
if argumentCount == 2, let command = arguments?[1], strcmp(command, "idle") == 0 {
    CommandMain.run("xidlelock") {
        try IdleQuery.run(.ms)
        return 0
    }
}

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
