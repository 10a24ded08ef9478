import Foundation

/// A proleptic Gregorian date and time of day in GMT, and its conversion to and from `Date`.
///
/// Written out by hand so HTTP dates need no Calendar, TimeZone or locale.
struct CivilTime: Equatable {
    var year: Int
    var month: Int  // 1...12
    var day: Int  // 1...31
    var hour = 0
    var minute = 0
    var second = 0

    static let dayNames = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let longDayNames = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    static let monthNames = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let daysBeforeMonth = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334]
    private static let secondsPerDay = 86_400

    /// A date with `time` in `HH:MM:SS` form, or nil when the time is malformed.
    init?(year: Int, month: Int, day: Int, time: Substring) {
        let parts = time.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3,
            let hour = HTTPDate.number(parts[0], digits: 2...2),
            let minute = HTTPDate.number(parts[1], digits: 2...2),
            let second = HTTPDate.number(parts[2], digits: 2...2)
        else { return nil }
        self.init(year: year, month: month, day: day, hour: hour, minute: minute, second: second)
    }

    init(year: Int, month: Int, day: Int, hour: Int = 0, minute: Int = 0, second: Int = 0) {
        (self.year, self.month, self.day) = (year, month, day)
        (self.hour, self.minute, self.second) = (hour, minute, second)
    }

    /// The GMT calendar fields of `date`, to the whole second below it.
    init(_ date: Date) {
        // Clamped to years 1...9999, the four digits an HTTP-date has, so `Int(_:)` cannot trap.
        let raw = date.timeIntervalSince1970
        let seconds = raw.isNaN ? 0 : Int(min(max(raw.rounded(.down), -62_135_596_800), 253_402_300_799))
        let (days, secondOfDay) = Self.floorDivide(seconds, Self.secondsPerDay)
        // Guess the year from the day count, then correct the guess by at most a step or two.
        var year = 1970 + days / 365
        while Self.daysSinceEpoch(year: year, month: 1, day: 1) > days { year -= 1 }
        while Self.daysSinceEpoch(year: year + 1, month: 1, day: 1) <= days { year += 1 }
        var month = 12
        while Self.daysSinceEpoch(year: year, month: month, day: 1) > days { month -= 1 }
        let day = days - Self.daysSinceEpoch(year: year, month: month, day: 1) + 1
        self.init(
            year: year, month: month, day: day, hour: secondOfDay / 3600,
            minute: secondOfDay % 3600 / 60, second: secondOfDay % 60)
    }

    /// 0 for Sunday through 6 for Saturday.
    var weekday: Int {
        // 1970-01-01 was a Thursday.
        Self.floorDivide(Self.daysSinceEpoch(year: year, month: month, day: day) + 4, 7).remainder
    }

    /// The instant, or nil when a field is out of range (30 February, 25:00, …).
    /// A second of 60 is allowed for a leap second and lands on the next minute.
    var date: Date? {
        guard year >= 1, (1...12).contains(month), (1...Self.daysIn(month, of: year)).contains(day),
            (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        let days = Self.daysSinceEpoch(year: year, month: month, day: day)
        let seconds = days * Self.secondsPerDay + hour * 3600 + minute * 60 + second
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    static func daysIn(_ month: Int, of year: Int) -> Int {
        month == 12 ? 31 : daysBeforeMonth[month] - daysBeforeMonth[month - 1] + (month == 2 && isLeap(year) ? 1 : 0)
    }

    /// Days from 1970-01-01 to the given date; negative before it. `year` must be at least 1.
    static func daysSinceEpoch(year: Int, month: Int, day: Int) -> Int {
        // Leap days in years 1 through y: every 4th year, less centuries, plus every 400th.
        func leapDays(through y: Int) -> Int { y / 4 - y / 100 + y / 400 }
        let wholeYears = 365 * (year - 1970) + leapDays(through: year - 1) - leapDays(through: 1969)
        let leapThisYear = month > 2 && isLeap(year) ? 1 : 0
        return wholeYears + daysBeforeMonth[month - 1] + leapThisYear + day - 1
    }

    private static func floorDivide(_ a: Int, _ b: Int) -> (quotient: Int, remainder: Int) {
        let r = a % b
        return r < 0 ? (a / b - 1, r + b) : (a / b, r)
    }
}
