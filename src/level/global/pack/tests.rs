use super::*;

#[test]
fn blocks_grow_only_past_the_most_a_manifest_lists() {
    assert_eq!(block_for(0, 65536), 65536);
    assert_eq!(block_for(MAX_BLOCKS * 65536, 65536), 65536);
    assert_eq!(block_for(MAX_BLOCKS * 65536 + 1, 65536), 131072);
    assert_eq!(block_for(MAX_BLOCKS * 1000, 512), 1024);
}
