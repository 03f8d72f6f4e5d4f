// Fuzz target: one line from a control-socket client, as the agent reads it
// (LineBuffer gives ControlRequest.parse a String decoded from the bytes), and the
// client's reading of replies and events (JSONValue, HumanText).

func fuzzControlProtocol(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let line = fuzzString(data, size)
    checkJSON(line)
    checkRequest(line)
    return 0
}

/// Whatever parses prints as text that parses back to the same value, and the
/// client's renderings of it (`status`, `events`) do not trap.
func checkJSON(_ line: String) {
    guard let value = try? JSONValue(parsing: line) else { return }
    let text = value.text
    guard let again = try? JSONValue(parsing: text) else { finding("JSONValue.text does not parse: \(text.debugDescription)", line) }
    guard again == value else { finding("JSONValue text round trip changed the value: \(text.debugDescription)", line) }
    guard !text.utf8.contains(0x0A) else { finding("JSONValue.text has a raw newline (the protocol is one value per line)", line) }
    _ = HumanText.status(value)
    _ = HumanText.event(value)
}

/// A request that parses survives the trip through `line` (what the client sends)
/// unchanged; one that does not parse gets an error reply that is itself a valid
/// one-line reply carrying the message.
func checkRequest(_ line: String) {
    let request: ControlRequest
    do {
        request = try ControlRequest.parse(line)
    } catch {
        let reply = ControlRequest.errorReply(error.message)
        guard !error.message.isEmpty else { finding("empty ProtocolError message", line) }
        guard !reply.utf8.contains(0x0A), let parsed = try? JSONValue(parsing: reply),
              parsed["ok"] == .bool(false), parsed["error"]?.string == error.message else {
            finding("errorReply is not a one-line reply carrying the message: \(reply.debugDescription)", line)
        }
        return
    }
    let wire = request.line
    guard !wire.utf8.contains(0x0A), wire.utf8.count <= ControlRequest.maxLineBytes else {
        finding("request.line is not one line within maxLineBytes: \(wire.debugDescription)", line)
    }
    let again: ControlRequest
    do {
        again = try ControlRequest.parse(wire)
    } catch {
        finding("request.line \(wire.debugDescription) does not parse: \(error.message)", line)
    }
    guard again == request else {
        finding("round trip changed the request: \(request) became \(again) via \(wire.debugDescription)", line)
    }
    switch request {
    case .inhibit(let why, let duration):
        guard why.utf8.count <= 256 else { finding("inhibit why longer than 256 bytes", line) }
        checkDuration(duration, line)
    case .disable(let duration):
        checkDuration(duration, line)
    default:
        break
    }
}

func checkDuration(_ duration: Millis?, _ line: String) {
    guard let duration else { return }
    guard duration.value > 0, duration.value <= tenYears else { finding("for_ms \(duration.value) outside 1 ms...10 years", line) }
}
