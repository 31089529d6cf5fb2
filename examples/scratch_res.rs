use gamesolver::iv_table_file::IvTableFile;
fn main() {
    let f = IvTableFile::load(std::path::Path::new("/work/iv1e9.tbl")).unwrap();
    let l: Vec<u64> = f.losing.iter().copied().filter(|&p| p > 100_000_000).collect();
    let mut h = vec![(0u64, 0usize); 125];
    for &p in &l {
        h[(p % 125) as usize].0 += 1;
        h[(p % 125) as usize].1 = (p % 125) as usize;
    }
    h.sort_unstable_by(|a, b| b.0.cmp(&a.0));
    for n in [31, 35, 40, 44] {
        let mut cls: Vec<usize> = h[..n].iter().map(|x| x.1).collect();
        cls.sort();
        let mask: u128 = cls.iter().fold(0, |m, &c| m | 1u128 << c);
        let cover: u64 = h[..n].iter().map(|x| x.0).sum();
        println!("{n}: {:.4} {:#x} {:?}", cover as f64 / l.len() as f64, mask, cls);
    }
    println!("{:?}", &h[25..50]);
    let all = &f.losing;
    let mut counts = [0usize; 3];
    println!("total {}", all.len());
    let _ = &mut counts;
}
