// The tokenizer's oracle: gpt-3-encoder's own JavaScript encode over a
// JSON Lines file, printed as test/data/read_megatron_index.py prints a
// dataset's documents, so that the two outputs compare line for line.
//
//   node gpt3_encode.js GPT3_ENCODER_DIR FILE.jsonl [--append-eod] [--key K]
//
// With --append-eod a non-empty document ends with <|endoftext|> (50256),
// as Megatron's preprocess_data.py ends it. The time the encoder took goes
// to stderr.
'use strict';
const fs = require('fs');
const path = require('path');

const [dir, file, ...rest] = process.argv.slice(2);
const appendEod = rest.includes('--append-eod');
const key = rest.includes('--key') ? rest[rest.indexOf('--key') + 1] : 'text';
const {encode} = require(path.resolve(dir, 'Encoder.js'));

const lines = fs.readFileSync(file, 'utf8').split('\n');
if (lines[lines.length - 1] === '') lines.pop();
const texts = lines.map(line => JSON.parse(line)[key]);
const began = process.hrtime.bigint();
const docs = texts.map(text => {
  const ids = encode(text);
  if (appendEod && ids.length > 0) ids.push(50256);
  return ids;
});
const seconds = Number(process.hrtime.bigint() - began) / 1e9;
const out = docs.map((ids, d) => `document ${d}: ${ids.join(' ')}`);
process.stdout.write(out.join('\n') + '\n');
const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
process.stderr.write(`gpt-3-encoder: ${docs.length} documents, ${
    docs.reduce((n, d) => n + d.length, 0)} tokens, ${bytes} bytes in ${
    seconds.toFixed(3)} s (${(bytes / 1e6 / seconds).toFixed(2)} MB/s)\n`);
