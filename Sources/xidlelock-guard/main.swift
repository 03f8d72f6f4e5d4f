import IdleCore
import Platform
import SessionGuard

// `xidlelock-guard`: root's daemon, also what `xidlelock guard` execs. Its flags are
// `xidlelock guard`'s, parsed by the same code.
CommandMain.run("xidlelock-guard") {
    let arguments = Array(CommandLine.arguments.dropFirst())
    switch arguments == ["--version"] ? .version : try GuardOptions.parse(arguments[...]) {
    case .help(let text):
        return CommandMain.say(text)
    case .version:
        return CommandMain.say("xidlelock-guard \(Invocation.versionNumber)")
    case .sessionGuard(let options):
        return try GuardService.run(options)
    default:
        throw UsageError("xidlelock-guard takes only `xidlelock guard`'s options")
    }
}
