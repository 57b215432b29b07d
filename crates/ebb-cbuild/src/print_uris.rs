//! Parses what `apt-get source --print-uris PACKAGE` prints: one line per
//! file of the source package, `'URI' NAME SIZE HASH:HEX` (apt-get(8),
//! `--print-uris`), among notices and the "Need to get" line. The `.dsc`
//! (Debian source control file) names the source package and its version:
//! `NAME_VERSION.dsc` (dpkg-source(1); the epoch is not in file names).

/// One file apt would download.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceFile {
    /// Where apt fetches it from.
    pub uri: String,
    /// Its file name once downloaded.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A source package as apt-get describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrintedSource {
    /// The source package's name (may differ from the name asked for,
    /// e.g. `libsqlite3-0` is built from `sqlite3`).
    pub package: String,
    /// Its Debian version without the epoch, as in file names.
    pub version: String,
    /// The `.dsc` file's name.
    pub dsc: String,
    /// Every file, the `.dsc` included.
    pub files: Vec<SourceFile>,
}

/// Why the output could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrintUrisError {
    /// A quoted line that is not `'URI' NAME SIZE HASH`.
    BadLine(String),
    /// No `.dsc` among the files.
    NoDsc,
    /// More than one `.dsc` (more than one package asked for).
    SeveralDsc(Vec<String>),
    /// A `.dsc` name that is not `NAME_VERSION.dsc`.
    BadDscName(String),
}

impl std::fmt::Display for PrintUrisError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PrintUrisError::BadLine(line) => write!(f, "unexpected line: {line}"),
            PrintUrisError::NoDsc => f.write_str("no .dsc file listed"),
            PrintUrisError::SeveralDsc(names) => {
                write!(f, "several .dsc files: {}", names.join(", "))
            }
            PrintUrisError::BadDscName(name) => write!(f, "not NAME_VERSION.dsc: {name}"),
        }
    }
}

/// Parses `apt-get source --print-uris` output for one package.
pub fn parse(output: &str) -> Result<PrintedSource, PrintUrisError> {
    let files = output
        .lines()
        .filter(|line| line.starts_with('\''))
        .map(parse_line)
        .collect::<Result<Vec<_>, _>>()?;
    let dscs: Vec<&SourceFile> = files.iter().filter(|f| f.name.ends_with(".dsc")).collect();
    let dsc = match dscs.as_slice() {
        [] => return Err(PrintUrisError::NoDsc),
        [one] => one.name.clone(),
        several => {
            return Err(PrintUrisError::SeveralDsc(
                several.iter().map(|f| f.name.clone()).collect(),
            ))
        }
    };
    let stem = dsc.strip_suffix(".dsc").unwrap_or(&dsc);
    let (package, version) = stem
        .split_once('_')
        .filter(|(package, version)| !package.is_empty() && !version.is_empty())
        .ok_or_else(|| PrintUrisError::BadDscName(dsc.clone()))?;
    Ok(PrintedSource {
        package: package.to_owned(),
        version: version.to_owned(),
        dsc: dsc.clone(),
        files,
    })
}

fn parse_line(line: &str) -> Result<SourceFile, PrintUrisError> {
    let bad = || PrintUrisError::BadLine(line.to_owned());
    let rest = &line[1..];
    let (uri, rest) = rest.split_once('\'').ok_or_else(bad)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let [name, size, _hash] = fields.as_slice() else {
        return Err(bad());
    };
    // A name with a path separator would download outside the directory.
    if uri.is_empty() || name.contains('/') || *name == ".." {
        return Err(bad());
    }
    Ok(SourceFile {
        uri: uri.to_owned(),
        name: (*name).to_owned(),
        size: size.parse().map_err(|_| bad())?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Captured on Debian bookworm (`apt-get source --print-uris musl`).
    const MUSL: &str = "Reading package lists...
NOTICE: 'musl' packaging is maintained in the 'Git' version control system at:
https://salsa.debian.org/reiner/musl.git
Please use:
git clone https://salsa.debian.org/reiner/musl.git
to retrieve the latest (possibly unreleased) updates to the package.
Need to get 1086 kB of source archives.
'http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.3-1.dsc' musl_1.2.3-1.dsc 3511 SHA256:243a7462e9c751da662c4c61d4c96b6318c796ba302b72f6cdf74ea5427a9b4f
'http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.3.orig.tar.gz' musl_1.2.3.orig.tar.gz 1058642 SHA256:7d5b0b6062521e4627e099e4c9dc8248d32a30285e959b7eecaa780cf8cfd4a4
'http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.3.orig.tar.gz.asc' musl_1.2.3.orig.tar.gz.asc 490 SHA256:eb83fe63629f569ca1bd2b52b852093c75656bc526ff19c1402151d7cd584ba2
'http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.3-1.debian.tar.xz' musl_1.2.3-1.debian.tar.xz 22884 SHA256:8f12cc808dbec030179a25ce2645a4c0b622ee8011c2afcec53b87ec5867a8cc
";

    /// Captured on Debian bookworm (`apt-get source --print-uris sqlite3`):
    /// the URI escapes `+`, the name does not.
    const SQLITE: &str = "Reading package lists...
Need to get 13.9 MB of source archives.
'http://deb.debian.org/debian/pool/main/s/sqlite3/sqlite3_3.40.1-2%2bdeb12u2.dsc' sqlite3_3.40.1-2+deb12u2.dsc 2519 SHA256:ee3459ae9d00939741c7708fc1b8ce1bde12d8c3fb1dfa005bbbc8651d884e23
'http://deb.debian.org/debian/pool/main/s/sqlite3/sqlite3_3.40.1.orig-www.tar.xz' sqlite3_3.40.1.orig-www.tar.xz 5865720 SHA256:a5e95a18d1b59729278860559ded78751b9163ffb5bb906c5cd24c015f71d5fd
'http://deb.debian.org/debian/pool/main/s/sqlite3/sqlite3_3.40.1.orig.tar.xz' sqlite3_3.40.1.orig.tar.xz 8019048 SHA256:aaa776260ab4dc976db34aa7891819484c8676b5b2783123ebc6301e2ca5d655
'http://deb.debian.org/debian/pool/main/s/sqlite3/sqlite3_3.40.1-2%2bdeb12u2.debian.tar.xz' sqlite3_3.40.1-2+deb12u2.debian.tar.xz 34260 SHA256:0843bc12e4364076477935ce313a6d0796fd899a989ff18ebb6545540e10e4ca
";

    #[test]
    fn musl_gives_its_version_and_dsc() {
        let source = parse(MUSL).unwrap();
        assert_eq!(source.package, "musl");
        assert_eq!(source.version, "1.2.3-1");
        assert_eq!(source.dsc, "musl_1.2.3-1.dsc");
        assert_eq!(source.files.len(), 4);
        assert_eq!(source.files[1].name, "musl_1.2.3.orig.tar.gz");
        assert_eq!(source.files[1].size, 1_058_642);
        assert_eq!(
            source.files[0].uri,
            "http://deb.debian.org/debian/pool/main/m/musl/musl_1.2.3-1.dsc"
        );
    }

    #[test]
    fn the_version_comes_from_the_unescaped_name() {
        let source = parse(SQLITE).unwrap();
        assert_eq!(source.package, "sqlite3");
        assert_eq!(source.version, "3.40.1-2+deb12u2");
    }

    #[test]
    fn no_file_lines_is_no_dsc() {
        assert_eq!(
            parse("Reading package lists...\n"),
            Err(PrintUrisError::NoDsc)
        );
    }

    #[test]
    fn two_packages_are_refused() {
        let both = format!("{MUSL}{SQLITE}");
        assert!(matches!(parse(&both), Err(PrintUrisError::SeveralDsc(names)) if names.len() == 2));
    }

    #[test]
    fn malformed_lines_are_named() {
        for line in [
            "'http://x/a.dsc' a_1.dsc",
            "'http://x/a.dsc a_1.dsc 1 SHA256:00",
            "'http://x/a.dsc' a_1.dsc big SHA256:00",
            "'http://x/a.dsc' ../a_1.dsc 1 SHA256:00",
            "'' a_1.dsc 1 SHA256:00",
        ] {
            assert_eq!(
                parse(line),
                Err(PrintUrisError::BadLine(line.to_owned())),
                "{line}"
            );
        }
    }

    #[test]
    fn a_dsc_without_version_is_refused() {
        let line = "'http://x/musl.dsc' musl.dsc 1 SHA256:00";
        assert_eq!(
            parse(line),
            Err(PrintUrisError::BadDscName("musl.dsc".to_owned()))
        );
    }
}
