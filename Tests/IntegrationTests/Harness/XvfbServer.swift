import Foundation

/// A private X server for one test. `-displayfd 1` makes Xvfb choose a free display
/// number (it claims it through the lock file, so parallel tests never collide) and
/// print it on stdout; `-noreset` keeps the idle counter when the last client leaves.
final class XvfbServer {
    let process: Process
    /// `:N`, for DISPLAY.
    let display: String
    private let logFile: URL

    /// `extraArguments` change the server, e.g. `-extension NAME` turns an extension off.
    init(in directory: URL, extraArguments: [String] = []) async throws {
        let displayFile = directory.appending(path: "xvfb.display")
        logFile = directory.appending(path: "xvfb.log")
        process = try startProcess(
            "Xvfb", ["-displayfd", "1", "-noreset", "-nolisten", "tcp", "-screen", "0", "640x480x24"] + extraArguments,
            environment: ProcessInfo.processInfo.environment, in: directory,
            stdout: displayFile, stderr: logFile)
        var number = ""
        try await waitUntil("Xvfb to print its display number", context: { [logFile] in
            (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
        }) { [process, logFile] in
            let text = (try? String(contentsOf: displayFile, encoding: .utf8)) ?? ""
            if text.hasSuffix("\n") {
                number = text.trimmingCharacters(in: .whitespacesAndNewlines)
                return true
            }
            if !process.isRunning {
                throw CommandFailed(command: ["Xvfb"], result: CommandResult(
                    exit: Exit(process), stdout: text,
                    stderr: (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""))
            }
            return false
        }
        display = ":\(number)"
    }

    /// Ends the server (SIGTERM, then SIGKILL if it lingers) and waits for it.
    func stop() async {
        guard process.isRunning else { return }
        process.terminate()
        if (try? await process.waitForExit("Xvfb", timeout: .seconds(5))) == nil {
            kill(process.processIdentifier, SIGKILL)
            _ = try? await process.waitForExit("Xvfb after SIGKILL", timeout: .seconds(5))
        }
    }

    /// Kills the server outright, as a crash would: every client loses its connection.
    func crash() async throws {
        kill(process.processIdentifier, SIGKILL)
        _ = try await process.waitForExit("the killed Xvfb")
    }
}
