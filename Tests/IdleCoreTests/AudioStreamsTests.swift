import IdleCore
import Testing

@Suite("--not-when-audio: which applications play")
struct AudioStreamsTests {
    @Test("a stream that plays names its application and process")
    func playing() {
        let apps = AudioStreams.playing([AudioStream(application: "Firefox", binary: "firefox-esr", pid: 1234)])
        #expect(apps.map(\.description) == ["Firefox (pid 1234)"])
    }

    @Test("paused, muted, at volume 0, on a muted output, or a notification sound: not playing", arguments: [
        AudioStream(application: "mpv", pid: 7, corked: true),
        AudioStream(application: "mpv", pid: 7, muted: true),
        AudioStream(application: "mpv", pid: 7, volumeZero: true),
        AudioStream(application: "mpv", pid: 7, sinkMuted: true),
        AudioStream(application: "Slack", role: "event", pid: 7),
    ])
    func silent(stream: AudioStream) {
        #expect(!stream.isAudible)
        #expect(AudioStreams.playing([stream]).isEmpty)
    }

    @Test("other roles play")
    func roles() {
        #expect(AudioStream(application: "Zoom", role: "phone").isAudible)
        #expect(AudioStream(application: "mpv", role: "video").isAudible)
    }

    @Test("one application with many streams is one: its streams merged, its processes listed once each")
    func merged() {
        let apps = AudioStreams.playing([
            AudioStream(application: "Chromium", pid: 40),
            AudioStream(application: "Chromium", pid: 22),
            AudioStream(application: "Chromium", pid: 40),
            AudioStream(application: "Chromium", pid: 51, corked: true),
            AudioStream(application: "mpv", pid: 9),
        ])
        #expect(apps.map(\.description) == ["Chromium (pids 22, 40)", "mpv (pid 9)"])
    }

    @Test("one paused stream does not silence another of the same application")
    func onePausedOnePlaying() {
        let apps = AudioStreams.playing([
            AudioStream(application: "Firefox", pid: 5, corked: true),
            AudioStream(application: "Firefox", pid: 5),
        ])
        #expect(apps.map(\.description) == ["Firefox (pid 5)"])
    }

    @Test("without a name, the program's; without either, said so; without a pid, none shown")
    func names() {
        #expect(AudioStream(binary: "aplay").applicationName == "aplay")
        #expect(AudioStream(application: "", binary: "aplay").applicationName == "aplay")
        #expect(AudioStream().applicationName == "an unnamed application")
        #expect(AudioStreams.playing([AudioStream(application: "game")]).map(\.description) == ["game"])
    }

    @Test("a name with control characters is shown harmless")
    func sanitized() {
        let apps = AudioStreams.playing([AudioStream(application: "evil\nname", pid: 3)])
        #expect(apps.map(\.description) == ["evil\\u{a}name (pid 3)"])
    }

    @Test("the debug summary says why each stream counts or not")
    func summary() {
        #expect(AudioStreams.summary([]) == "no streams")
        #expect(AudioStreams.summary([
            AudioStream(application: "Firefox", pid: 1), AudioStream(application: "mpv", pid: 2, corked: true, muted: true),
        ]) == "2 streams: Firefox (pid 1) playing, mpv (pid 2) paused, muted")
        #expect(AudioStreams.summary([AudioStream(application: "Slack", role: "event")]) == "1 stream: Slack a notification sound")
    }
}
