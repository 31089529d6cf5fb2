//! What the cold-start examples (`iv_cold`, `grundy_cold`) measure a child process by, and
//! how they sum up their rounds: one copy for both, included with `#[path]`.

/// This process's resource use so far.
pub struct Usage {
    /// User + system CPU time of every thread.
    pub cpu_seconds: f64,
    /// Peak resident memory.
    pub peak_rss_mib: f64,
}

/// This process's resource use so far (getrusage).
pub fn usage() -> Usage {
    // SAFETY: getrusage only writes the struct it is given, which is plain data.
    let usage = unsafe {
        let mut usage = std::mem::zeroed::<libc::rusage>();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut usage), 0, "getrusage");
        usage
    };
    let seconds = |time: libc::timeval| time.tv_sec as f64 + time.tv_usec as f64 * 1e-6;
    Usage {
        cpu_seconds: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        // Linux reports kibibytes.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}

/// The median of `values` (the upper one of an even count).
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}
