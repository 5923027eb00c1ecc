"""An independent reader of Megatron's indexed dataset, written from the
format's description (megatron/core/datasets/indexed_dataset.py), not from
strata's code: prints the header and every document's tokens.

  read_megatron_index.py PREFIX

The .idx, little endian: b"MMIDIDX\\x00\\x00", version <Q (1), dtype code
<B (1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, 6 float64, 7 float32,
8 uint16), sequence count <Q, document count <Q, then sequence lengths
int32[sequences], sequence byte offsets into .bin int64[sequences], and
document indices int64[documents] (each document's first sequence, then
the total). The .bin holds the tokens."""
import struct
import sys

CODES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 6: "d", 7: "f", 8: "H"}


def read(prefix):
    """The header, sizes, pointers, document index, the .bin's bytes and
    the struct code of a token."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    with open(prefix + ".bin", "rb") as f:
        data = f.read()
    assert idx[:9] == b"MMIDIDX\x00\x00", "magic"
    version, = struct.unpack_from("<Q", idx, 9)
    code, = struct.unpack_from("<B", idx, 17)
    sequences, documents = struct.unpack_from("<QQ", idx, 18)
    offset = 34
    sizes = struct.unpack_from("<%di" % sequences, idx, offset)
    offset += 4 * sequences
    pointers = struct.unpack_from("<%dq" % sequences, idx, offset)
    offset += 8 * sequences
    doc_index = struct.unpack_from("<%dq" % documents, idx, offset)
    offset += 8 * documents
    assert offset == len(idx), "the index has %d bytes past its arrays" % (len(idx) - offset)
    return version, code, sizes, pointers, doc_index, data, CODES[code]


def sequence(index, s):
    """Sequence s's tokens."""
    _, _, sizes, pointers, _, data, fmt = index
    return list(struct.unpack_from("<%d%s" % (sizes[s], fmt), data, pointers[s]))


if __name__ == "__main__":
    index = read(sys.argv[1])
    version, code, sizes, pointers, doc_index, data, fmt = index
    print("version %d dtype %d sequences %d document-index %s" % (version, code, len(sizes), list(doc_index)))
    for d in range(len(doc_index) - 1):
        tokens = []
        for s in range(doc_index[d], doc_index[d + 1]):
            tokens += sequence(index, s)
        print("document %d: %s" % (d, " ".join(map(str, tokens))))
    print("bin bytes %d, tokens %d" % (len(data), len(data) // struct.calcsize(fmt)))
