import CX11
import Glibc
import IdleCore
import Platform

/// `xidlelock doctor`: gathers the facts (the display, the agent's status, the
/// locker on disk, the keyboard grab) for `Doctor.diagnose`, prints the findings and
/// exits 0 only when a lock would happen. With `--policy FILE`, holds the running
/// agent against that profile instead, and exits 0 only when every requirement is met.
public enum DoctorCommand {
    public static func run(_ options: DoctorOptions) throws(UsageError) -> Int32 {
        if let profile = options.policy { return try checkPolicy(profile, options) }
        let report = Doctor.diagnose(facts(options))
        _ = try? FileIO.writeAll(1, (options.json ? report.json.text : report.text) + "\n")
        return report.lockWouldHappen ? 0 : 1
    }

    /// A bad profile is a usage error (exit 64), never a pass: a fleet check must see it.
    static func checkPolicy(_ path: String, _ options: DoctorOptions) throws(UsageError) -> Int32 {
        let requirements = try PolicyCheck.requirements(ConfigSources.thisMachine.read(path), path: path)
        // Root's check (the fleet check) speaks from the guard's own verification: a
        // socket the session's user serves is no evidence against that user, and no guard
        // means no session is guarded (`--socket` still asks one agent by hand).
        if getuid() == 0, options.socket == nil {
            var answer: JSONValue?
            var problem: String?
            if access(GuardLink.socketPath, F_OK) != 0 {
                problem = "xidlelock-guard.service is not running (no \(GuardLink.socketPath)): no session is guarded (systemctl enable --now xidlelock-guard.service)"
            } else {
                do { answer = try GuardLink.sessions() } catch { problem = error.message }
            }
            let report = PolicyCheck.check(requirements, path: path, guardReport: answer, problem: problem,
                                           machine: machineFacts(), ownership: adminsProgram)
            _ = try? FileIO.writeAll(1, (options.json ? report.json.text : report.text) + "\n")
            return report.met ? 0 : 1
        }
        var status: JSONValue?
        var problem: String?
        do { status = try ControlClient.status(socket: options.socket) } catch { problem = error.message }
        let report = PolicyCheck.check(requirements, path: path, status: status, agentProblem: problem,
                                       machine: machineFacts(), ownership: adminsProgram)
        _ = try? FileIO.writeAll(1, (options.json ? report.json.text : report.text + "\n" + PolicyCheck.userCheckNote) + "\n")
        return report.met ? 0 : 1
    }

    /// The machine's facts a profile may ask about: Yama's ptrace scope (a kernel
    /// without Yama has no /proc/sys/kernel/yama at all).
    static func machineFacts() -> MachineFacts {
        let yama = "/proc/sys/kernel/yama"
        let text = FileIO.readSmallFile(yama + "/ptrace_scope").map { String(decoding: $0, as: UTF8.self) }
        let why = "cannot be read (\(String(cString: strerror(errno))))"
        return MachineFacts(ptraceScope: YamaPtraceScope(yamaExists: access(yama, F_OK) == 0, text: text, why: why))
    }

    /// A program is the admin's when root owns it and its directory, and no one else
    /// may write either: nil, or why not.
    static let adminsProgram: PolicyCheck.ProgramOwnership = { path in
        var info = stat()
        guard stat(path, &info) == 0 else { return "\(path) cannot be read (\(String(cString: strerror(errno))))" }
        guard info.st_uid == 0 else { return "\(path) is owned by uid \(info.st_uid), not root" }
        guard info.st_mode & 0o022 == 0 else { return "\(path) may be written by others than root (mode \(String(info.st_mode & 0o7777, radix: 8)))" }
        let directory = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard stat(directory.isEmpty ? "/" : directory, &info) == 0, info.st_uid == 0, info.st_mode & 0o022 == 0 else {
            return "its directory \(directory) is not root's alone: another user could replace it"
        }
        return nil
    }

    static func facts(_ options: DoctorOptions) -> DoctorFacts {
        var facts = DoctorFacts()
        facts.display = getenv("DISPLAY").map { String(cString: $0) }
        facts.sessionProblem = WaylandSession.refusal(sessionType: SocketPath.environment("XDG_SESSION_TYPE"),
                                                      waylandDisplay: SocketPath.environment("WAYLAND_DISPLAY"))
        var x: XServer?
        do throws(AgentError) {
            x = try XServer()
            facts.extensions = ["MIT-SCREEN-SAVER", "XInput 2"] + (x!.hasExtension("RANDR") ? ["RandR"] : [])
            switch x!.clientOwners {
            case .success: facts.extensions.append("X-Resource")
            case .failure(let unavailable): facts.grabOwnersUnknown = unavailable.reason
            }
        } catch {
            facts.displayProblem = error.message
            facts.displayFix = XDisplayName.fix(for: error)
        }
        facts.socket = try? SocketPath.resolve(options.socket).path
        do {
            facts.status = try ControlClient.status(socket: options.socket)
        } catch {
            facts.agentProblem = error.message
            // An agent that cannot make its socket there runs without it: say why.
            if options.socket == nil, let directory = try? SocketPath.resolve(nil).directory {
                facts.socketProblem = SocketPath.problem(with: directory)
                if facts.socketProblem != nil, let display = facts.display {
                    facts.socketlessAgent = SocketlessAgent.find(display: display)
                }
            }
        }
        // The locker: the running agent's, else the one the config files and the
        // policy would give an agent started now.
        if let status = facts.status, case .array(let settings)? = status["settings"],
           let locker = settings.first(where: { $0["name"]?.string == "locker" }) {
            facts.lockerCommand = locker["value"]?.string
            facts.lockerFrom = locker["from"]?.string
        } else {
            do {
                if case .agent(let agentOptions) = try Invocation.parse([], sources: .thisMachine) {
                    facts.configErrors = agentOptions.configProblems.map(\.description)
                    if let given = agentOptions.locker {
                        facts.lockerCommand = given
                        facts.lockerFrom = agentOptions.origins["--locker"]?.description
                    } else if let found = LockerChoice.candidates.first(where: { LockerChoice.findProgram($0.program, path: LockerChoice.pathVariable()) != nil }) {
                        facts.lockerCommand = found.command
                        facts.lockerFrom = "default (the first installed)"
                    }
                }
            } catch {
                facts.configProblem = error.message
            }
        }
        if let command = facts.lockerCommand {
            // `exec i3lock -n` starts i3lock: that is the program to look for.
            let trimmed = command.drop { $0 == " " || $0 == "\t" }
            facts.lockerProgram = ShellCommand.firstWord(of: command)
                ?? (trimmed.hasPrefix("exec ") ? ShellCommand.firstWord(of: String(trimmed.dropFirst(5))) : nil)
            facts.lockerPath = facts.lockerProgram.flatMap { LockerChoice.findProgram($0, path: LockerChoice.pathVariable()) }
        }
        // The grab probe means nothing while a locker runs (it may be its grab); while
        // none runs (none started, or the last failed) a grab is another program's.
        let lockerRuns = facts.status?["locker"]?["state"]?.string == "running"
        if let x, !lockerRuns {
            facts.keyboardGrabbedByOther = x.grabbedByOther(.keyboard)
            facts.pointerGrabbedByOther = x.grabbedByOther(.pointer)
        }
        return facts
    }
}
