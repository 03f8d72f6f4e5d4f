import IdleCore
import Platform

/// A monitor's rectangle on the root window (or the root window itself).
struct ScreenArea: Equatable {
    var x: Int32
    var y: Int32
    var width: Int32
    var height: Int32

    /// The corner of this area that `p` lies in, corners being `size` pixels square
    /// (at most half the area, so that they never overlap).
    func corner(of p: PointerPosition, size: Int32) -> ScreenCorner? {
        guard p.x >= x, p.y >= y, p.x < x + width, p.y < y + height else { return nil }
        let w = Swift.min(size, Swift.max(width / 2, 1))
        let h = Swift.min(size, Swift.max(height / 2, 1))
        let left = p.x < x + w
        let right = p.x >= x + width - w
        let top = p.y < y + h
        let bottom = p.y >= y + height - h
        switch (top, bottom, left, right) {
        case (true, _, true, _): return .topLeft
        case (true, _, _, true): return .topRight
        case (_, true, true, _): return .bottomLeft
        case (_, true, _, true): return .bottomRight
        default: return nil
        }
    }
}
