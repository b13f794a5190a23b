use super::*;
use crate::level::erasure::{add, scale};

/// The terms promotions send (each data shard times its coefficients,
/// summed by the holders) are the crate's parity, byte for byte, for
/// several shapes.
#[test]
fn terms_from_coefficients_sum_to_the_parity() {
    let mut rng = fastrand::Rng::with_seed(9);
    for (k, p) in [(1, 1), (3, 1), (4, 1), (2, 2), (6, 2), (5, 3)] {
        let code = Code::new(k, p).unwrap();
        let data: Vec<Vec<u8>> = (0..k)
            .map(|_| (0..4099).map(|_| rng.u8(..)).collect())
            .collect();
        let refs: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        let mut expected = vec![vec![0u8; 4099]; p];
        code.encode(&refs, &mut expected).unwrap();
        let mut summed = vec![vec![0u8; 4099]; p];
        let mut term = vec![0xa5u8; 4099];
        for (index, piece) in data.iter().enumerate() {
            let coefficients = code.coefficients(index).unwrap();
            assert_eq!(coefficients.len(), p);
            for (j, c) in coefficients.iter().enumerate() {
                scale(*c, piece, &mut term);
                add(&mut summed[j], &term);
            }
        }
        assert_eq!(summed, expected, "k {k}, p {p}");
    }
}
