//! The standard Prometheus process metrics (the names every client library exports and
//! dashboards expect: `process_resident_memory_bytes`, `process_cpu_seconds_total`, ...),
//! read from `/proc/self` at each scrape.
//!
//! They are written without the crate's prefix, so they must be registered on the
//! unprefixed root registry. On platforms other than Linux nothing is registered; a scrape
//! that cannot read `/proc` omits what it could not read rather than failing.

use prometheus_client::registry::Registry;

/// Registers the process metrics on `registry`, which should have no prefix.
pub(crate) fn register(registry: &mut Registry) {
    #[cfg(target_os = "linux")]
    registry.register_collector(Box::new(linux::ProcessCollector));
    #[cfg(not(target_os = "linux"))]
    let _ = registry;
}

#[cfg(target_os = "linux")]
mod linux {
    use procfs::process::{LimitValue, Process};
    use prometheus_client::collector::Collector;
    use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
    use prometheus_client::metrics::counter::ConstCounter;
    use prometheus_client::metrics::gauge::ConstGauge;
    use prometheus_client::registry::Unit;

    /// Reads `/proc/self` when scraped.
    #[derive(Debug)]
    pub(super) struct ProcessCollector;

    impl Collector for ProcessCollector {
        fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
            let Ok(process) = Process::myself() else { return Ok(()) };
            if let Ok(stat) = process.stat() {
                let ticks = procfs::ticks_per_second() as f64;
                let cpu = (stat.utime + stat.stime) as f64 / ticks;
                counter(
                    &mut encoder,
                    "process_cpu",
                    "Total user and system CPU time spent in seconds",
                    Some(Unit::Seconds),
                    cpu,
                )?;
                let rss = stat.rss.saturating_mul(procfs::page_size());
                gauge(
                    &mut encoder,
                    "process_resident_memory",
                    "Resident memory size in bytes",
                    Some(Unit::Bytes),
                    rss,
                )?;
                gauge(
                    &mut encoder,
                    "process_virtual_memory",
                    "Virtual memory size in bytes",
                    Some(Unit::Bytes),
                    stat.vsize,
                )?;
                gauge(
                    &mut encoder,
                    "process_threads",
                    "Number of OS threads in the process",
                    None,
                    stat.num_threads,
                )?;
                // Boot time has a resolution of one second, as in every client library.
                if let Ok(boot) = procfs::boot_time_secs() {
                    let start = boot as f64 + stat.starttime as f64 / ticks;
                    gauge(
                        &mut encoder,
                        "process_start_time",
                        "Start time of the process since unix epoch in seconds",
                        Some(Unit::Seconds),
                        start,
                    )?;
                }
            }
            if let Ok(open) = process.fd_count() {
                gauge(
                    &mut encoder,
                    "process_open_fds",
                    "Number of open file descriptors",
                    None,
                    open as u64,
                )?;
            }
            if let Ok(limits) = process.limits() {
                if let LimitValue::Value(max) = limits.max_open_files.soft_limit {
                    gauge(
                        &mut encoder,
                        "process_max_fds",
                        "Maximum number of open file descriptors",
                        None,
                        max,
                    )?;
                }
            }
            Ok(())
        }
    }

    /// Writes one gauge.
    fn gauge<N>(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: N,
    ) -> Result<(), std::fmt::Error>
    where
        ConstGauge<N>: EncodeMetric,
    {
        let metric = ConstGauge::new(value);
        metric.encode(encoder.encode_descriptor(name, help, unit.as_ref(), metric.metric_type())?)
    }

    /// Writes one counter.
    fn counter(
        encoder: &mut DescriptorEncoder,
        name: &str,
        help: &str,
        unit: Option<Unit>,
        value: f64,
    ) -> Result<(), std::fmt::Error> {
        let metric = ConstCounter::new(value);
        metric.encode(encoder.encode_descriptor(name, help, unit.as_ref(), metric.metric_type())?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn the_process_metrics_are_written_under_their_standard_names() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        let value = |name: &str| {
            text.lines().find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse::<f64>().ok())
        };
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_threads",
            "process_start_time_seconds",
            "process_open_fds",
            "process_max_fds",
        ] {
            assert!(value(name).is_some(), "{name} missing from:\n{text}");
        }
        assert!(value("process_resident_memory_bytes").unwrap() > 0.0);
        assert!(value("process_open_fds").unwrap() >= 1.0);
        assert!(value("process_threads").unwrap() >= 1.0);
        assert!(text.contains("# TYPE process_cpu_seconds counter"), "{text}");
    }
}
