//! Wall-clock time from the CMOS real-time clock (MC146818-compatible:
//! index port 0x70, data port 0x71). Registers 0x00 seconds, 0x02 minutes,
//! 0x04 hours, 0x07 day, 0x08 month, 0x09 year (two digits), 0x32 century
//! (the ACPI FADT's default); status register A (0x0a) bit 7 "update in
//! progress"; status register B (0x0b) bit 1 "24-hour" and bit 2 "binary"
//! (else BCD). In 12-hour mode bit 7 of the hours is "PM".
//!
//! The conversion ([`RtcReading::unix_seconds`]) is pure and host-tested;
//! reading the ports ([`read_cmos`]) runs only on the target.

/// Status register B: hours are 0–23 (else 1–12 with the PM bit).
const STATUS_B_24_HOUR: u8 = 1 << 1;
/// Status register B: values are binary (else BCD).
const STATUS_B_BINARY: u8 = 1 << 2;
/// In 12-hour mode, the hours register's PM flag.
const HOUR_PM: u8 = 1 << 7;

/// The raw registers of one RTC reading, as the chip encodes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtcReading {
    /// Register 0x00, 0–59.
    pub seconds: u8,
    /// Register 0x02, 0–59.
    pub minutes: u8,
    /// Register 0x04: 0–23, or 1–12 with bit 7 = PM.
    pub hours: u8,
    /// Register 0x07, day of the month.
    pub day: u8,
    /// Register 0x08, 1–12.
    pub month: u8,
    /// Register 0x09, year of the century.
    pub year: u8,
    /// Register 0x32, or 0 when there is none (then 20xx is assumed).
    pub century: u8,
    /// Status register B (0x0b): the encoding of the others.
    pub status_b: u8,
}

/// Decodes a BCD byte (0x59 → 59).
pub fn from_bcd(value: u8) -> u8 {
    (value >> 4) * 10 + (value & 0x0f)
}

/// Days from 1970-01-01 to the proleptic Gregorian date (`month` 1–12).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    // Counting years from March makes the leap day the last of its year.
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let month_from_march = i64::from((month + 9) % 12);
    let day_of_year = (153 * month_from_march + 2) / 5 + i64::from(day) - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

impl RtcReading {
    /// Seconds since 1970-01-01 00:00:00 UTC (the RTC holds UTC under
    /// QEMU's default `-rtc base=utc`), or `None` for an impossible date.
    pub fn unix_seconds(&self) -> Option<u64> {
        let binary = self.status_b & STATUS_B_BINARY != 0;
        let decode = |v: u8| if binary { v } else { from_bcd(v) };
        let pm = self.status_b & STATUS_B_24_HOUR == 0 && self.hours & HOUR_PM != 0;
        let mut hours = decode(self.hours & !HOUR_PM);
        if self.status_b & STATUS_B_24_HOUR == 0 {
            // 12-hour clock: 12 AM is 0 h, 12 PM is 12 h.
            hours = match (hours, pm) {
                (12, false) => 0,
                (12, true) => 12,
                (h, true) => h + 12,
                (h, false) => h,
            };
        }
        let (seconds, minutes) = (decode(self.seconds), decode(self.minutes));
        let (day, month) = (decode(self.day), decode(self.month));
        let century = match decode(self.century) {
            0 => 20,
            c => c,
        };
        let year = i64::from(century) * 100 + i64::from(decode(self.year));
        if seconds > 59 || minutes > 59 || hours > 23 || !(1..=12).contains(&month) {
            return None;
        }
        if !(1..=31).contains(&day) || year < 1970 {
            return None;
        }
        let days = days_from_civil(year, u32::from(month), u32::from(day));
        let seconds =
            days * 86_400 + i64::from(hours) * 3600 + i64::from(minutes) * 60 + i64::from(seconds);
        u64::try_from(seconds).ok()
    }
}

/// Reads the CMOS RTC: waits until no update is in progress, reads every
/// register, and repeats until two readings agree (an update may start
/// between the check and the reads).
#[cfg(target_os = "none")]
pub fn read_cmos() -> Option<u64> {
    use x86_64::instructions::port::Port;
    fn register(index: u8) -> u8 {
        let mut select: Port<u8> = Port::new(0x70);
        let mut data: Port<u8> = Port::new(0x71);
        // SAFETY: selecting a CMOS register (bit 7 clear keeps NMIs
        // enabled, as they are) and reading it changes nothing else.
        unsafe { select.write(index & 0x7f) };
        // SAFETY: reading CMOS data port 0x71 returns the register just
        // selected and has no side effect on the RTC.
        unsafe { data.read() }
    }
    fn reading() -> RtcReading {
        // Status register A bit 7: an update is in progress (≤ 2 ms).
        let mut spins = 0u32;
        while register(0x0a) & 0x80 != 0 && spins < 10_000_000 {
            spins += 1;
            core::hint::spin_loop();
        }
        RtcReading {
            seconds: register(0x00),
            minutes: register(0x02),
            hours: register(0x04),
            day: register(0x07),
            month: register(0x08),
            year: register(0x09),
            century: register(0x32),
            status_b: register(0x0b),
        }
    }
    let mut previous = reading();
    for _ in 0..8 {
        let next = reading();
        if next == previous {
            return next.unix_seconds();
        }
        previous = next;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const BCD_24: u8 = STATUS_B_24_HOUR;

    fn reading(hours: u8, status_b: u8) -> RtcReading {
        // 2026-11-22 in BCD, 04:13:38 apart from the hours under test.
        RtcReading {
            seconds: 0x38,
            minutes: 0x13,
            hours,
            day: 0x22,
            month: 0x11,
            year: 0x26,
            century: 0x20,
            status_b,
        }
    }

    #[test]
    fn bcd_decodes() {
        assert_eq!(from_bcd(0x00), 0);
        assert_eq!(from_bcd(0x59), 59);
        assert_eq!(from_bcd(0x12), 12);
    }

    #[test]
    fn civil_days_match_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(2024, 2, 29), 19_782);
    }

    #[test]
    fn bcd_24_hour_reading_is_unix_time() {
        // `date -u -d '2026-11-22 04:13:38' +%s`
        assert_eq!(reading(0x04, BCD_24).unix_seconds(), Some(1_795_320_818));
    }

    #[test]
    fn binary_reading_matches_bcd() {
        let binary = RtcReading {
            seconds: 38,
            minutes: 13,
            hours: 4,
            day: 22,
            month: 11,
            year: 26,
            century: 20,
            status_b: STATUS_B_24_HOUR | STATUS_B_BINARY,
        };
        assert_eq!(binary.unix_seconds(), Some(1_795_320_818));
    }

    #[test]
    fn twelve_hour_readings_convert() {
        let at_4am = reading(0x04, BCD_24).unix_seconds().unwrap();
        assert_eq!(reading(0x04, 0).unix_seconds(), Some(at_4am));
        assert_eq!(reading(0x84, 0).unix_seconds(), Some(at_4am + 12 * 3600));
        // 12 AM is midnight, 12 PM is noon.
        assert_eq!(reading(0x12, 0).unix_seconds(), Some(at_4am - 4 * 3600));
        assert_eq!(reading(0x92, 0).unix_seconds(), Some(at_4am + 8 * 3600));
        // Binary 12-hour: the PM bit over a binary hour (11 PM).
        let binary_pm = RtcReading {
            seconds: 38,
            minutes: 13,
            hours: 0x80 | 11,
            day: 22,
            month: 11,
            year: 26,
            century: 20,
            status_b: STATUS_B_BINARY,
        };
        assert_eq!(binary_pm.unix_seconds(), Some(at_4am + 19 * 3600));
    }

    #[test]
    fn impossible_dates_and_missing_century_are_handled() {
        assert_eq!(reading(0x25, BCD_24).unix_seconds(), None);
        let mut no_century = reading(0x04, BCD_24);
        no_century.century = 0;
        assert_eq!(no_century.unix_seconds(), Some(1_795_320_818));
        let mut bad_month = reading(0x04, BCD_24);
        bad_month.month = 0x13;
        assert_eq!(bad_month.unix_seconds(), None);
    }
}
