@testable import Agent
@testable import Platform
import Testing

@Suite("XTEST devices (--ignore-xtest)")
struct XtestDevicesTests {
    @Test("the set holds the ids put in, in every word of the bitmap, and no others")
    func bitmap() {
        let ids: [Int32] = [0, 4, 5, 63, 64, 127, 128, 200, 255]
        let set = XtestDevices(ids)
        #expect(set.ids == ids)
        for id in Int32(0)..<256 { #expect(set.contains(id) == ids.contains(id), "\(id)") }
        #expect(XtestDevices() == XtestDevices([]))
        #expect(XtestDevices([4, 5]) != XtestDevices([4, 10]))
    }

    @Test("an id outside the server's range is taken for XTEST: it never keeps the screen unlocked")
    func outOfRange() {
        #expect(XtestDevices().contains(256))
        #expect(XtestDevices().contains(-1))
    }

    @Test("the server's property says XTEST; the name's suffix does where the property is missing")
    func rule() {
        #expect(XtestDevices.isXtest(name: "Virtual core XTEST pointer", hasXtestProperty: true))
        #expect(XtestDevices.isXtest(name: "jiggle XTEST keyboard", hasXtestProperty: false))
        #expect(XtestDevices.isXtest(name: "renamed", hasXtestProperty: true))
        #expect(!XtestDevices.isXtest(name: "Xvfb mouse", hasXtestProperty: false))
        #expect(!XtestDevices.isXtest(name: "Logitech USB Receiver", hasXtestProperty: false))
    }
}
