import CBus
import Glibc
import IdleCore
import Platform

/// One bus, joined and kept joined without the agent ever waiting for it: the
/// connection, handshake and calls are asynchronous (`BusConnection`). A bus that
/// cannot be joined, or is lost, is joined again when its socket appears (inotify, no
/// timer) and, where its socket may be there and answer later (refused, timed out,
/// lost), tried again after 5 s, doubling to 5 min. A bus with no socket wakes the
/// agent for nothing. Its owner says what each up and down means.
final class BusLink {
    /// The session bus, or the system bus.
    let userBus: Bool
    let name: String
    private weak var agent: DesktopAgent?
    private var connection: BusConnection?
    /// 5 s, doubling to 5 min.
    private var backoff = Backoff(first: .seconds(5), limit: .minutes(5))
    private var retryTimer: RetryTimer?
    /// Its socket, watched for while the bus is not joined.
    private var socketWatch: SocketWatch?
    private var everConnected = false
    /// In the user's words ("connected", "connecting", "not connected: why; what
    /// happens next"), for status and doctor.
    private(set) var state = "not used"
    /// The bus answered its handshake.
    var onReady: () -> Void = {}
    /// The bus could not be joined (`lost` false: it never answered, or no connection
    /// could start) or was lost: why, and what happens next.
    var onDown: (_ why: String, _ next: String, _ lost: Bool) -> Void = { _, _, _ in }

    init(userBus: Bool, name: String, agent: DesktopAgent) {
        self.userBus = userBus
        self.name = name
        self.agent = agent
    }

    /// The connection, once the bus has answered.
    var bus: OpaquePointer? { connection?.isReady == true ? connection?.bus : nil }
    var isReady: Bool { connection?.isReady == true }

    /// Starts joining it, unless a connection is under way or up.
    func connect() {
        guard connection == nil else { return }
        var err: Int32 = 0
        guard let bus = xil_bus_connect(userBus ? 1 : 0, &err) else { return failed(abs(err), lost: false) }
        state = "connecting"
        let connection = BusConnection(connecting: bus, name: name, onReady: { [unowned self] in
            backoff.reset()
            retryTimer?.cancel()
            retryTimer = nil
            socketWatch?.cancel()
            socketWatch = nil
            everConnected = true
            state = "connected"
            onReady()
        }, onLost: { [unowned self] code in
            let wasReady = isReady
            self.connection = nil
            failed(code, lost: wasReady)
        })
        self.connection = connection
        agent?.addSource(connection)
    }

    /// `err`: an errno; ETIMEDOUT from a handshake not done in time.
    private func failed(_ err: Int32, lost: Bool) {
        let why = err == ETIMEDOUT && !lost
            ? "it did not answer within \(BusConnection.handshakeLimit)" : String(cString: strerror(err))
        let socket = userBus ? BusAddress.sessionSocket(SocketPath.environment) : BusAddress.systemSocket(SocketPath.environment)
        if socketWatch == nil, let socket, let watch = SocketWatch(socket, { [unowned self] in
            Log.debug("\(socket) appeared: joining the \(name)")
            retryTimer?.cancel()
            retryTimer = nil
            // A socket just made may not listen yet (bind comes before listen): the
            // first retries are quick (joined now, then 100 ms, 200 ms …).
            backoff.reset(startingAt: .ms(100))
            connect()
        }) {
            socketWatch = watch
            agent?.addSource(watch)
        }
        let watching = socketWatch != nil
        let noSocket = [ENOENT, ENOMEDIUM].contains(err)
        // Without a watch, a bus that was there is tried again anyway (its directory
        // may come back); one never seen and with no socket is not.
        let retrying = !noSocket || (!watching && everConnected)
        let next = retrying ? "trying again" : watching ? "joined when \(socket ?? "its socket") appears" : "restart the agent once the bus exists"
        state = "not connected: \(why); \(next)"
        onDown(why, next, lost)
        guard retrying, retryTimer == nil else { return }
        let timer = RetryTimer(at: SystemClock.now().monotonic + backoff.next()) { [unowned self] in
            retryTimer = nil
            connect()
        }
        retryTimer = timer
        agent?.addSource(timer)
    }
}
