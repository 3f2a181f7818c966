use super::*;
use std::vec;
use std::vec::Vec;

const TICK: EventRecord<'static> = EventRecord {
    task_id: "t1",
    seq: Seq::ZERO,
    at: Millis(1000),
    event_type: "dev.taskstream.tick",
    payload: br#"{"i":0}"#,
};

fn event(seq: u64) -> Record<'static> {
    Record::Event(EventRecord {
        seq: Seq::new(seq).unwrap(),
        ..TICK
    })
}

fn to_vec(record: &Record<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; encoded_len(record).unwrap()];
    let n = encode(record, &mut buf).unwrap().len();
    assert_eq!(n, buf.len(), "encoded_len is exact");
    buf
}

/// Golden bytes plus round trip, in the style of postcard's `test_one`.
#[track_caller]
fn check(record: Record<'_>, expected: &[u8]) {
    let bytes = to_vec(&record);
    assert_eq!(bytes, expected, "golden bytes");
    assert_eq!(decode(&bytes), Ok((record, bytes.len())));
}

/// Frames a raw body as `encode` would, without validating it.
fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::from(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap().to_le_bytes());
    out.extend_from_slice(body);
    let crc = crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn crc32c_check_value() {
    assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    assert_eq!(crc32c(b""), 0);
}

#[test]
fn golden_bytes_of_each_record_kind() {
    check(
        event(3),
        &[
            0xC5, 0x7A, 1, 35, 0, 0, 0, // magic, version, body length 35
            0, // variant Event
            2, b't', b'1', // task id
            3,    // seq
            0xE8, 0x07, // at = 1000 (varint)
            19, b'd', b'e', b'v', b'.', b't', b'a', b's', b'k', b's', b't', b'r', b'e', b'a', b'm',
            b'.', b't', b'i', b'c', b'k', // event type
            7, b'{', b'"', b'i', b'"', b':', b'0', b'}', // payload
            0x3F, 0x88, 0x20, 0x55, // CRC-32C
        ],
    );
    check(
        Record::Transition {
            event: EventRecord {
                event_type: "dev.taskstream.task.status",
                payload: br#"{"status":"working"}"#,
                ..TICK
            },
            state: br#"{"a":1}"#,
        },
        &[
            0xC5, 0x7A, 1, 63, 0, 0, 0, //
            1, // variant Transition
            2, b't', b'1', 0, 0xE8, 0x07, //
            26, b'd', b'e', b'v', b'.', b't', b'a', b's', b'k', b's', b't', b'r', b'e', b'a', b'm',
            b'.', b't', b'a', b's', b'k', b'.', b's', b't', b'a', b't', b'u', b's', //
            20, b'{', b'"', b's', b't', b'a', b't', b'u', b's', b'"', b':', b'"', b'w', b'o', b'r',
            b'k', b'i', b'n', b'g', b'"', b'}', //
            7, b'{', b'"', b'a', b'"', b':', b'1', b'}', // state
            0x4E, 0xF0, 0xB5, 0x97,
        ],
    );
    check(
        Record::Truncate {
            task_id: "t1",
            before: Seq::new(300).unwrap(),
        },
        &[
            0xC5, 0x7A, 1, 6, 0, 0, 0, 2, 2, b't', b'1', 0xAC, 0x02, 0x25, 0xFC, 0x04, 0x18,
        ],
    );
    check(
        Record::Remove { task_id: "t1" },
        &[
            0xC5, 0x7A, 1, 4, 0, 0, 0, 3, 2, b't', b'1', 0x2A, 0xD5, 0xDE, 0x4F,
        ],
    );
}

#[test]
fn every_truncation_is_detected() {
    let bytes = to_vec(&event(7));
    for cut in 0..bytes.len() {
        assert!(
            matches!(decode(&bytes[..cut]), Err(RecordError::Truncated { .. })),
            "cut at {cut}: {:?}",
            decode(&bytes[..cut])
        );
    }
}

#[test]
fn every_single_bit_flip_is_rejected() {
    // Alone and followed by another valid record (as in a log), where a corrupted length field
    // reads into the neighbour instead of running off the end.
    let one = to_vec(&event(7));
    let mut two = one.clone();
    two.extend_from_slice(&to_vec(&event(8)));
    for bytes in [&one, &two] {
        for bit in 0..one.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let got = decode(&flipped);
            assert!(got.is_err(), "bit {bit} flipped still decodes: {got:?}");
            // The read path's decode skips field validation, never the frame and checksum.
            let written = decode_written(&flipped);
            assert!(
                written.is_err(),
                "bit {bit} flipped still decodes as written: {written:?}"
            );
            let expected_kind = match bit / 8 {
                0 | 1 => matches!(got, Err(RecordError::BadMagic)),
                2 => matches!(got, Err(RecordError::BadVersion(_))),
                3..=6 => matches!(
                    got,
                    Err(RecordError::BadChecksum { .. }
                        | RecordError::Truncated { .. }
                        | RecordError::TooLarge { .. })
                ),
                _ => matches!(got, Err(RecordError::BadChecksum { .. })),
            };
            assert!(expected_kind, "bit {bit}: {got:?}");
        }
    }
}

#[test]
fn records_laid_end_to_end_read_back_in_order() {
    let mut log = Vec::new();
    for seq in 0..5 {
        log.extend_from_slice(&to_vec(&event(seq)));
    }
    let mut rest = &log[..];
    let mut seen = Vec::new();
    while !rest.is_empty() {
        let (record, used) = decode(rest).unwrap();
        seen.push(record.event().unwrap().seq.get());
        rest = &rest[used..];
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);
    // Zeroed space after the end of a log is not a record.
    assert_eq!(decode(&[0u8; 32]), Err(RecordError::BadMagic));
}

#[test]
fn encode_validates_what_decode_validates() {
    let mut buf = [0u8; 256];
    let with = |f: fn(&mut EventRecord<'static>)| {
        let mut e = TICK;
        f(&mut e);
        Record::Event(e)
    };
    let cases: [(Record<'static>, RecordError); 7] = [
        (
            with(|e| e.event_type = "tick"),
            RecordError::InvalidEventType(EventTypeError::Unprefixed),
        ),
        (
            with(|e| e.payload = b"[1]"),
            RecordError::InvalidJson(JsonError::NotAnObject),
        ),
        (
            with(|e| e.payload = b"{\"i\": 0}"),
            RecordError::PayloadNotCompact,
        ),
        (
            with(|e| e.payload = b"{\"i\":0"),
            RecordError::InvalidJson(JsonError::Syntax { at: 6 }),
        ),
        (with(|e| e.task_id = ""), RecordError::InvalidTaskId),
        (with(|e| e.task_id = "a\nb"), RecordError::InvalidTaskId),
        (
            Record::Transition {
                event: TICK,
                state: b"null",
            },
            RecordError::InvalidJson(JsonError::NotAnObject),
        ),
    ];
    for (record, expected) in cases {
        assert_eq!(encode(&record, &mut buf), Err(expected), "{record:?}");
    }
    let long = "x".repeat(MAX_TASK_ID_BYTES + 1);
    let record = Record::Remove { task_id: &long };
    assert_eq!(encode(&record, &mut buf), Err(RecordError::InvalidTaskId));
}

#[test]
fn encode_reports_a_short_buffer() {
    let record = event(1);
    let len = encoded_len(&record).unwrap();
    let mut buf = vec![0u8; len];
    for short in 0..len {
        assert_eq!(
            encode(&record, &mut buf[..short]),
            Err(RecordError::BufferTooSmall),
            "buffer of {short}"
        );
    }
    assert!(encode(&record, &mut buf).is_ok());
}

#[test]
fn decode_validates_bodies_that_pass_the_checksum() {
    // The same body layout as an Event, but with values `encode` would refuse.
    #[derive(serde::Serialize)]
    enum Raw<'a> {
        Event(&'a str, u64, u64, &'a str, &'a [u8]),
    }
    let body = |r: Raw<'_>| {
        let mut buf = [0u8; 128];
        let n = postcard::to_slice(&r, &mut buf).unwrap().len();
        buf[..n].to_vec()
    };
    let ok = body(Raw::Event("t", 1, 2, "a.b.c", b"{}"));
    assert!(decode(&frame(&ok)).is_ok());
    let cases = [
        (
            // Refused by `Seq`'s serde `try_from`.
            body(Raw::Event("t", 1 << 53, 2, "a.b.c", b"{}")),
            RecordError::Malformed,
        ),
        (
            body(Raw::Event("t", 1, 2, "a.b", b"{}")),
            RecordError::InvalidEventType(EventTypeError::Unprefixed),
        ),
        (
            body(Raw::Event("t", 1, 2, "a.b.c", b"{} ")),
            RecordError::PayloadNotCompact,
        ),
        (
            body(Raw::Event("t", 1, 2, "a.b.c", b"\"s\"")),
            RecordError::InvalidJson(JsonError::NotAnObject),
        ),
        (
            body(Raw::Event("", 1, 2, "a.b.c", b"{}")),
            RecordError::InvalidTaskId,
        ),
        ([ok.as_slice(), &[0]].concat(), RecordError::Malformed),
        (ok[..ok.len() - 1].to_vec(), RecordError::Malformed),
        (vec![9, 1, b't'], RecordError::Malformed),
        (vec![0, 1, 0xFF, 1, 2, 0, 0], RecordError::Malformed),
    ];
    for (body, expected) in cases {
        assert_eq!(
            decode(&frame(&body)).map(|r| r.1),
            Err(expected),
            "{body:?}"
        );
        assert_eq!(decode_body(&body), Err(expected));
    }
    let mut other_version = frame(&ok);
    other_version[2] = 2;
    assert_eq!(decode(&other_version), Err(RecordError::BadVersion(2)));
    let mut huge = frame(&ok);
    huge[3..7].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        decode(&huge),
        Err(RecordError::TooLarge {
            len: u32::MAX as usize
        })
    );
}

proptest::proptest! {
    #[test]
    fn round_trips(
        task_id in "[a-zA-Z0-9_-]{1,64}",
        seq in 0..=Seq::MAX.get(),
        at: u64,
        text in ".{0,200}",
    ) {
        let payload = serde_json::to_vec(&serde_json::json!({ "text": text })).unwrap();
        let record = Record::Event(EventRecord {
            task_id: &task_id,
            seq: Seq::new(seq).unwrap(),
            at: Millis(at),
            event_type: "com.example.partial",
            payload: &payload,
        });
        let bytes = to_vec(&record);
        proptest::prop_assert_eq!(decode_written(&bytes), Ok((record, bytes.len())));
        proptest::prop_assert_eq!(decode(&bytes), Ok((record, bytes.len())));
    }

    #[test]
    fn crc32c_by_eight_matches_the_bitwise_definition(data in proptest::collection::vec(0u8.., 0..100)) {
        // The definition, one bit at a time: no table at all.
        let mut crc = !0u32;
        for &b in &data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
            }
        }
        proptest::prop_assert_eq!(crc32c(&data), !crc);
    }
}

#[test]
fn the_length_bound_holds_for_every_kind_at_the_largest_integers() {
    let big = EventRecord {
        seq: Seq::new(u64::MAX >> 1).unwrap_or(Seq::ZERO),
        at: Millis(u64::MAX),
        ..TICK
    };
    for record in [
        event(0),
        Record::Event(big),
        Record::Transition {
            event: big,
            state: br#"{"status":"working"}"#,
        },
        Record::Truncate {
            task_id: "t1",
            before: big.seq,
        },
        Record::Remove { task_id: "t1" },
    ] {
        let exact = encoded_len(&record).unwrap();
        let bound = max_encoded_len(&record);
        assert!(bound >= exact, "{record:?}: bound {bound} < {exact}");
        assert!(
            bound <= exact + 64,
            "{record:?}: bound {bound} far above {exact}"
        );
    }
}

#[test]
fn encode_checked_writes_what_encode_writes_and_trusts_only_a_proof_over_the_same_bytes() {
    let payload = crate::event::Payload::new(TICK.payload).unwrap();
    let ty = EventType::new(TICK.event_type).unwrap();
    let record = event(7);
    let mut a = vec![0u8; 128];
    let mut b = vec![0u8; 128];
    assert_eq!(
        encode_checked(&record, (ty, payload), &mut a, crc32c).unwrap(),
        encode(&record, &mut b).unwrap()
    );
    // A record whose payload is not JSON, with a "proof" over other, valid bytes: refused, as
    // `encode` refuses it.
    let bad = Record::Event(EventRecord {
        payload: b"{not json",
        ..TICK
    });
    assert_eq!(
        encode_checked(&bad, (ty, payload), &mut a, crc32c).map(<[u8]>::len),
        encode(&bad, &mut b).map(<[u8]>::len)
    );
    assert!(matches!(
        encode_checked(&bad, (ty, payload), &mut a, crc32c),
        Err(RecordError::InvalidJson(_))
    ));
    // A bad task id is refused even with a proof.
    let copy = TICK.payload;
    let bad_id = Record::Event(EventRecord {
        task_id: "",
        payload: copy,
        ..TICK
    });
    assert_eq!(
        encode_checked(&bad_id, (ty, payload), &mut a, crc32c),
        Err(RecordError::InvalidTaskId)
    );
}

#[test]
fn peek_frame_len_reads_the_claimed_length_of_a_readable_header_only() {
    let bytes = to_vec(&event(3));
    assert_eq!(peek_frame_len(&bytes), Some(bytes.len()));
    // Cut after the header: the claim is still read (the caller checks it fits).
    assert_eq!(peek_frame_len(&bytes[..HEADER_BYTES]), Some(bytes.len()));
    // A damaged checksum does not change the claim.
    let mut bad = bytes.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(peek_frame_len(&bad), Some(bytes.len()));
    // A header cut short, or with a wrong magic or version, claims nothing.
    assert_eq!(peek_frame_len(&bytes[..HEADER_BYTES - 1]), None);
    for at in 0..3 {
        let mut wrong = bytes.clone();
        wrong[at] ^= 0x40;
        assert_eq!(peek_frame_len(&wrong), None, "byte {at}");
    }
    // A length beyond the bound is reported as claimed.
    let mut huge = bytes;
    huge[3..7].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(
        peek_frame_len(&huge),
        Some(u32::MAX as usize + OVERHEAD_BYTES)
    );
}
