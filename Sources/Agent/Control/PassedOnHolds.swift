import Glibc
import IdleCore
import Platform

/// A hold passed on by the agent of another session of this user (`HoldRouting`): the
/// program that owns a service's name on the session bus they share got it from a
/// caller of this session. The socket's door is this user's alone (SO_PEERCRED), but
/// any of the user's programs may knock: the hold counts as one of that service (which
/// a policy may allow where it refuses the socket's) only when the sender is the
/// program the bus said owns the service's name, and only for a caller logind places
/// in this agent's own session (the sender's word on that is not taken).
extension Agent {
    func takePassedOnHold(source: InhibitorSource, pid: UInt32, who: String, why: String, from client: ControlConnection) {
        func refuse(_ why: String) {
            Log.limited("refused holds", "refused a hold passed on by \(client.who): \(why)")
            client.send(ControlRequest.errorReply("refused: \(why)"))
        }
        guard client.passedOn == nil else { return refuse("one hold per connection") }
        guard let desktop, let own = machine.config.session, own.fromLogind else {
            return refuse("this agent follows no logind session: it cannot tell the caller's session")
        }
        guard let service = DesktopServices.sessionServices.first(where: { $0.source == source }),
              let nameOwner = desktop.nameOwners[source] else {
            return refuse("this agent knows no other owner of the \(source.rawValue) service's name")
        }
        guard nameOwner.pid == UInt32(bitPattern: client.pid), ProcessStart.time(of: client.pid) == nameOwner.started else {
            return refuse("only the program that owns \(service.source.row.what)'s name on the session bus (pid \(nameOwner.pid)) may pass its holds on")
        }
        let asked = desktop.logind.askSession(ofProcess: pid) { [weak self, weak client] answer in
            guard let self, let client, !client.isFinished else { return }
            switch answer {
            case .success(let facts) where facts.guarded.id == own.id:
                let owner = HoldOwner(source, "passed on over \(client.owner.client)")
                let claim = HoldClaim(key: "", who: ClientText.sanitized("\(who), passed on by \(client.who)"), why: why)
                switch request(.holdAsked(owner, claim)) {
                case .granted(let id)?:
                    client.passedOn = owner
                    client.requestDeadline = nil
                    client.send(ControlRequest.reply([("id", .number(Double(id)))]))
                case .refused(let why)?: client.send(ControlRequest.errorReply("refused: \(why)"))
                default: client.send(ControlRequest.errorReply("refused: not held"))
                }
            case .success(let facts):
                refuse("pid \(pid) runs in logind session \(ClientText.sanitized(facts.guarded.id, maxBytes: 64)), not in this agent's session \(own.id)")
            case .failure(let failure):
                refuse("logind cannot tell the session of pid \(pid): \(failure.why)")
            }
        }
        if !asked { refuse("logind cannot be asked now") }
    }
}
