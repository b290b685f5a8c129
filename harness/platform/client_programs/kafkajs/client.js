#!/usr/bin/env node
// kafka-chaos's KafkaJS client program: one executable for both roles of the client-program
// contract (docs/clients.md), on KafkaJS at whatever release is installed beside this file.
//
//   node client.js produce <the Java recorder's arguments>
//   node client.js consume <the Java member's arguments>
//
// produce: sends the workload through KafkaJS's send(), each message's own outcome printed as
// producer_send_success / producer_send_error. KafkaJS has no accumulator: every send() call is
// its own produce request, and each call retries on its own. max.in.flight.requests.per.connection
// is both KafkaJS's maxInFlightRequests and how many send() calls this program keeps
// outstanding: unset (KafkaJS's default, no limit), one call a message at once; N, at most N
// calls, the messages that came due meanwhile going together in the next call (the idempotent
// and transactional producers run with 1, as KafkaJS documents them). With --transaction-size
// the sends go in transactions following the harness's plan read from stdin, each ending in a
// transaction_end line. consume: one start of one consumer-group member, journalling what it processes and
// each commit's outcome.
//
// stdout carries only the protocol's JSON lines; every line KafkaJS logs goes to stderr.
// Written against KafkaJS 2.x's public API (Kafka, producer, transaction, consumer, their
// instrumentation events).

'use strict'

const fs = require('fs')
const { performance } = require('perf_hooks')

const kafkajs = require('kafkajs')
const KAFKAJS_VERSION = require('kafkajs/package.json').version

const { Kafka, logLevel, CompressionTypes } = kafkajs

const HEAD_BYTES = 29 // "%015d:%012d:", as harness/workload/values.py
const PROGRESS_EVERY_MS = 200
const FLUSH_EVERY_MS = 100
const MAX_OUTSTANDING = 10000 // sends handed over and not yet reported (KafkaJS has no buffer limit)
const MAX_BATCH = 1000 // messages in one send() call at most
const END_ATTEMPTS = 6 // commit or abort calls for one transaction
const REPLACE_ATTEMPTS = 5 // fatal errors survived by a fresh producer
const INIT_ATTEMPTS = 3 // producer id initialisations (and connects of a new producer)
const INIT_BACKOFF_MS = 1000 // between them
const REFUSED_BACKOFF_MS = 20 // after a transaction a refused send aborted
const CLOSE_FATAL_MS = 5000 // disconnecting a producer after a fatal error

// ---------------------------------------------------------------------------------------------
// Output: one JSON object a line, handed to stdout at least every 100 ms.

let outBuffer = []

function emit(obj) {
  outBuffer.push(JSON.stringify(obj) + '\n')
  if (outBuffer.length >= 512) flush()
}

function flush() {
  if (outBuffer.length === 0) return
  const text = outBuffer.join('')
  outBuffer = []
  try {
    process.stdout.write(text)
  } catch (e) {
    // stdout gone: the harness is gone too
  }
}

const flusher = setInterval(flush, FLUSH_EVERY_MS)

function note(text) {
  process.stderr.write(`kafkajs-client: ${text}\n`)
}

/** Flush stdout, then exit with `code` once the pipe has taken it. */
function exitWith(code) {
  flush()
  clearInterval(flusher)
  process.stdout.write('', () => process.exit(code))
  setTimeout(() => process.exit(code), 2000).unref()
}

function fail(code, text) {
  note(text)
  exitWith(code)
  return new Promise(() => {}) // never resolves: the process is exiting
}

// Every line KafkaJS logs goes to stderr, one JSON object a line.
const logCreator = () => ({ namespace, label, log }) => {
  let text
  try {
    text = JSON.stringify({ level: label, namespace, ...log })
  } catch (e) {
    text = JSON.stringify({ level: label, namespace, message: String(log && log.message) })
  }
  process.stderr.write(text + '\n')
}

const nowNs = () => process.hrtime.bigint()
const nowUs = () => Math.round((performance.timeOrigin + performance.now()) * 1000)
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------
// Arguments and the producer.config file.

function parseArgs(argv) {
  const args = new Map()
  for (let i = 0; i + 1 < argv.length; i += 2) args.set(argv[i], argv[i + 1])
  return {
    get(name, fallback) {
      const value = args.get(name)
      if (value === undefined && fallback === undefined) {
        throw new Error(`missing argument ${name}`)
      }
      return value === undefined ? fallback : value
    },
    has: name => args.has(name),
  }
}

/** A Java properties file (key=value, key: value or key value; # and ! comments; a
 *  backslash at the end of a line continues it; the common escapes). */
function readProperties(path) {
  const props = {}
  const lines = fs.readFileSync(path, 'utf8').split(/\r?\n/)
  for (let n = 0; n < lines.length; n++) {
    let line = lines[n].replace(/^\s+/, '')
    if (line === '' || line[0] === '#' || line[0] === '!') continue
    while (/(^|[^\\])(\\\\)*\\$/.test(line) && n + 1 < lines.length) {
      line = line.slice(0, -1) + lines[++n].replace(/^\s+/, '')
    }
    const match = /^((?:\\.|[^=:\s\\])*)\s*[=:\s]?\s*(.*)$/.exec(line)
    const unescape = s =>
      s.replace(/\\(u[0-9a-fA-F]{4}|.)/g, (_, c) =>
        c[0] === 'u' && c.length === 5
          ? String.fromCharCode(parseInt(c.slice(1), 16))
          : { t: '\t', n: '\n', r: '\r', f: '\f' }[c] || c
      )
    props[unescape(match[1])] = unescape(match[2])
  }
  return props
}

// The producer settings (Java names) this program maps to KafkaJS, and those it cannot.
const NO_EQUIVALENT = {
  'linger.ms': 'KafkaJS has no linger: every send() call is its own produce request',
  'delivery.timeout.ms':
    'KafkaJS has no delivery timeout: a send ends when its retries are used up',
  'batch.size': 'KafkaJS has no batching across send() calls',
  'buffer.memory': `KafkaJS has no buffer limit (this program holds at most ${MAX_OUTSTANDING} sends in flight)`,
  'max.block.ms': 'KafkaJS never blocks a send',
}

/** The KafkaJS settings for the producer.config `props` (Java names); exits 2 when acks or
 *  idempotence cannot be honoured exactly. */
function producerSettings(props, transactional) {
  const used = new Set(['bootstrap.servers', 'key.serializer', 'value.serializer'])
  const take = key => {
    used.add(key)
    return props[key]
  }
  const s = { notes: [] }
  const acksText = take('acks')
  const acks = { all: -1, '-1': -1, 1: 1, 0: 0 }[acksText === undefined ? 'all' : acksText.trim()]
  if (acks === undefined) return { error: `acks=${acksText}: not one of all, -1, 1, 0` }
  s.acks = acks
  const idemText = take('enable.idempotence')
  if (idemText !== undefined && !/^(true|false)$/i.test(idemText.trim())) {
    return { error: `enable.idempotence=${idemText}: not true or false` }
  }
  s.idempotent = idemText === undefined ? false : idemText.trim().toLowerCase() === 'true'
  s.transactionalId = take('transactional.id')
  if (transactional) {
    if (!s.transactionalId) return { error: 'transactions need transactional.id in producer.config' }
    if (idemText !== undefined && !s.idempotent) {
      return { error: 'transactions need enable.idempotence=true (KafkaJS makes them idempotent)' }
    }
    s.idempotent = true
  } else if (s.transactionalId) {
    s.notes.push('transactional.id is set but no --transaction-size was given: sends go outside transactions')
    s.transactionalId = undefined
  }
  if (s.idempotent && acks !== -1) {
    return { error: `enable.idempotence=true with acks=${acksText}: KafkaJS's idempotent producer requires acks=all` }
  }
  const retriesText = take('retries')
  if (retriesText !== undefined) {
    const retries = Number(retriesText)
    if (!Number.isInteger(retries) || retries < 0) return { error: `retries=${retriesText}: not a count` }
    if (s.idempotent && retries < 1) {
      return { error: 'enable.idempotence=true with retries=0: KafkaJS refuses an idempotent producer without retries' }
    }
    s.retries = Math.min(retries, Number.MAX_SAFE_INTEGER)
  } else {
    s.retries = s.idempotent ? Number.MAX_SAFE_INTEGER : 5 // KafkaJS's own defaults
  }
  const inFlightText = take('max.in.flight.requests.per.connection')
  if (inFlightText !== undefined && !/^\d+$/.test(inFlightText.trim())) {
    return { error: `max.in.flight.requests.per.connection=${inFlightText}: not a count` }
  }
  s.maxInFlightRequests = inFlightText === undefined ? null : Number(inFlightText)
  if (s.idempotent && s.maxInFlightRequests !== 1) {
    s.notes.push(
      `max.in.flight.requests.per.connection=${inFlightText === undefined ? '(unset)' : inFlightText}: ` +
        'the idempotent KafkaJS producer runs with maxInFlightRequests 1 (as its documentation sets it up)'
    )
    s.maxInFlightRequests = 1
  }
  const timeoutText = take('request.timeout.ms')
  s.requestTimeout = timeoutText === undefined ? 30000 : Number(timeoutText)
  const txnTimeout = take('transaction.timeout.ms')
  s.transactionTimeout = txnTimeout === undefined ? 60000 : Number(txnTimeout)
  s.clientId = take('client.id') || 'kafka-chaos-kafkajs'
  const backoff = take('retry.backoff.ms')
  if (backoff !== undefined) s.initialRetryTime = Number(backoff)
  const backoffMax = take('retry.backoff.max.ms')
  if (backoffMax !== undefined) s.maxRetryTime = Number(backoffMax)
  const maxAge = take('metadata.max.age.ms')
  if (maxAge !== undefined) s.metadataMaxAge = Number(maxAge)
  const compression = take('compression.type')
  s.compression = CompressionTypes.None
  if (compression !== undefined && compression !== 'none') {
    if (compression === 'gzip') s.compression = CompressionTypes.GZIP
    else s.notes.push(`compression.type=${compression}: KafkaJS needs a codec plugin for it; sending uncompressed`)
  }
  for (const [key, why] of Object.entries(NO_EQUIVALENT)) {
    if (take(key) !== undefined) s.notes.push(`${key}=${props[key]}: no KafkaJS equivalent (${why}); ignored`)
  }
  for (const key of Object.keys(props)) {
    if (!used.has(key)) s.notes.push(`${key}=${props[key]}: no KafkaJS equivalent; ignored`)
  }
  return s
}

/** What the producer really runs with, by Java's names (the KafkaJS defaults resolved). */
function producerEffective(s, transactional) {
  const config = {
    acks: { '-1': 'all', 1: '1', 0: '0' }[String(s.acks)],
    'enable.idempotence': String(s.idempotent),
    retries: String(s.retries),
    'max.in.flight.requests.per.connection':
      s.maxInFlightRequests === null
        ? 'unlimited (kafkajs maxInFlightRequests null; one send() call a message)'
        : String(s.maxInFlightRequests),
    'delivery.timeout.ms': 'none (kafkajs has no delivery timeout)',
    'request.timeout.ms': String(s.requestTimeout),
    'linger.ms': '0 (kafkajs sends each send() call at once)',
    'retry.backoff.ms': String(s.initialRetryTime === undefined ? 300 : s.initialRetryTime),
    'retry.backoff.max.ms': String(s.maxRetryTime === undefined ? 30000 : s.maxRetryTime),
    'partitioner.class': 'kafkajs DefaultPartitioner (murmur2 on the key, as Java)',
    'client.id': s.clientId,
    'client.version': `kafkajs ${KAFKAJS_VERSION}`,
  }
  if (transactional) {
    config['transactional.id'] = s.transactionalId
    config['transaction.timeout.ms'] = String(s.transactionTimeout)
    config['transaction.version'] = '1 (kafkajs has no KIP-890 client side)'
  }
  return config
}

// ---------------------------------------------------------------------------------------------
// Errors: KafkaJS wraps the error of the last attempt (retries used up, or not retriable) in
// `cause`; the innermost one says what the broker or the network said.

function rootOf(error) {
  let e = error
  for (let depth = 0; e && e.cause && e.cause !== e && depth < 20; depth++) e = e.cause
  return e || error
}

/** The Kafka protocol error code of a broker's error (KafkaJSProtocolError), else undefined.
 *  A code KafkaJS does not know is reported by it as -99 "Unknown error code N": N is read. */
function errorCode(error) {
  for (let e = error, depth = 0; e && depth < 20; e = e.cause === e ? null : e.cause, depth++) {
    if (e.name === 'KafkaJSProtocolError' || (typeof e.code === 'number' && typeof e.type === 'string')) {
      if (e.code === -99) {
        const match = /Unknown error code (-?\d+)/.exec(e.message || '')
        if (match) return Number(match[1])
      }
      if (typeof e.code === 'number' && e.code >= 0) {
        // the innermost protocol error is the last attempt's answer
        const inner = e.cause && e.cause !== e ? errorCode(e.cause) : undefined
        return inner === undefined ? e.code : inner
      }
    }
  }
  return undefined
}

/** The error's name as this program reports it: the innermost error's KafkaJS name, with the
 *  protocol error's type (`KafkaJSProtocolError:NOT_ENOUGH_REPLICAS`). */
function errorName(error) {
  const root = rootOf(error)
  const name = (root && root.name) || 'Error'
  return root && typeof root.type === 'string' ? `${name}:${root.type}` : name
}

function describe(error) {
  const parts = []
  for (let e = error, depth = 0; e && depth < 20; e = e.cause === e ? null : e.cause, depth++) {
    const text = `${e.name || 'Error'}${typeof e.type === 'string' ? `(${e.type})` : ''}: ${e.message}`
    if (!parts.length || parts[parts.length - 1] !== text) parts.push(text)
  }
  return parts.join('; caused by ')
}

// ---------------------------------------------------------------------------------------------
// produce

const FATAL_TYPES = new Set([
  'INVALID_PRODUCER_EPOCH', // what a fenced producer is told on produce and EndTxn before 2.7 (KIP-588)
  'OUT_OF_ORDER_SEQUENCE_NUMBER',
  'UNSUPPORTED_VERSION',
  'TRANSACTIONAL_ID_AUTHORIZATION_FAILED',
  'CLUSTER_AUTHORIZATION_FAILED',
  'TOPIC_AUTHORIZATION_FAILED',
  'GROUP_AUTHORIZATION_FAILED',
])
const FATAL_CODES = new Set([90]) // PRODUCER_FENCED: KafkaJS 2.x does not name it
const TIMEOUT_NAMES = new Set(['KafkaJSRequestTimeoutError', 'KafkaJSTimeout', 'KafkaJSLockTimeout'])
const STATE_MESSAGES = /Transaction state exception|Cannot continue to use transaction once ended|already an ongoing transaction/

/** What an error of a transaction's call is, by the contract's cases: fatal, timeout, state
 *  (the client is in a state that refuses the call: after a failed end KafkaJS refuses every
 *  further end of that transaction) or other. */
function classify(error) {
  const root = rootOf(error)
  const code = errorCode(error)
  if ((root && FATAL_TYPES.has(root.type)) || FATAL_CODES.has(code)) return 'fatal'
  if (root && root.name === 'KafkaJSServerDoesNotSupportApiKey') return 'fatal'
  if (root && (TIMEOUT_NAMES.has(root.name) || root.type === 'REQUEST_TIMED_OUT')) return 'timeout'
  for (let e = error, depth = 0; e && depth < 20; e = e.cause === e ? null : e.cause, depth++) {
    if (STATE_MESSAGES.test(e.message || '')) return 'state'
  }
  return 'other'
}

class Recorder {
  constructor(args) {
    this.args = args
    this.topic = args.get('--topic')
    this.keys = Number(args.get('--keys', '16'))
    this.idBase = Number(args.get('--id-base', '0'))
    this.keyPrefix = args.get('--key-prefix', '')
    this.messageBytes = Number(args.get('--message-bytes', '100'))
    this.max = Number(args.get('--max-messages', '-1'))
    this.duration = Number(args.get('--duration-s', '-1'))
    this.rate = Number(args.get('--throughput', '-1'))
    this.closeMs = Number(args.get('--close-s', '30')) * 1000
    this.stopped = false
    this.stopWaiters = []
    this.stoppedAt = null
    this.pending = new Set() // promises of the sends not yet reported
    this.queue = [] // messages handed over and not yet in a send() call
    this.busy = 0 // send() calls outstanding
    this.sender = null // producer.send, or the open transaction's send
    this.settings = null
    this.lastProgress = 0
    this.partitionOf = new WeakMap() // message -> the partition the partitioner chose
  }

  stop() {
    if (this.stopped) return
    this.stopped = true
    this.stoppedAt = Date.now()
    for (const wake of this.stopWaiters.splice(0)) wake()
  }

  /** A promise that resolves at the stop (at once if stopped). */
  whenStopped() {
    return this.stopped ? Promise.resolve() : new Promise(resolve => this.stopWaiters.push(resolve))
  }

  /** The i-th message: its key, its value, its 29-byte head. */
  message(i) {
    const id = this.idBase + i
    const keySeq = Math.floor(i / this.keys)
    const head = String(id).padStart(15, '0') + ':' + String(keySeq).padStart(12, '0') + ':'
    const value = Buffer.alloc(Math.max(this.messageBytes, HEAD_BYTES), '.')
    value.write(head, 0, 'ascii')
    return { key: Buffer.from(`${this.keyPrefix}k${i % this.keys}`, 'utf8'), value, head }
  }

  progress(sent, force = false) {
    const now = Date.now()
    if (force || now - this.lastProgress >= PROGRESS_EVERY_MS) {
      this.lastProgress = now
      emit({ name: 'progress', sent })
    }
  }

  /** A partitioner factory: KafkaJS's default partitioner, remembering what it chose for each
   *  message (acks=0 answers with no partition). */
  partitioner() {
    const inner = kafkajs.Partitioners.DefaultPartitioner()
    return args => {
      const partition = inner(args)
      this.partitionOf.set(args.message, partition)
      return partition
    }
  }

  /** Hands message i to the pipeline (sent by `this.sender`), at `partition` or where the
   *  partitioner puts it; the returned promise resolves once its outcome is printed, to its
   *  error or null. */
  sendOne(i, partition) {
    const { key, value, head } = this.message(i)
    const message = partition === undefined ? { key, value } : { key, value, partition }
    let resolve
    const reported = new Promise(r => (resolve = r))
    this.pending.add(reported)
    reported.then(() => this.pending.delete(reported))
    this.queue.push({ message, head, partition, sentNs: nowNs(), resolve })
    this.dispatch()
    return reported
  }

  /** Hands the queued messages to KafkaJS: with no limit on send() calls outstanding
   *  (max.in.flight unset: KafkaJS's own default, no limit), one send() call a message at once;
   *  with a limit of N, at most N send() calls outstanding, the messages that came due
   *  meanwhile together in the next call (as the Java client's requests in flight hold batches). */
  dispatch() {
    const slots = this.settings.maxInFlightRequests
    while (this.queue.length && (slots === null || this.busy < slots)) {
      const items = this.queue.splice(0, slots === null ? 1 : MAX_BATCH)
      this.busy++
      this.sendBatch(items).then(() => {
        this.busy--
        this.dispatch()
      })
    }
  }

  /** One send() call for `items`; each item's outcome printed (a batch's records on one
   *  partition take consecutive offsets from its base offset, in the order given). */
  sendBatch(items) {
    const s = this.settings
    const latency = item => Number((nowNs() - item.sentNs) / 1000n)
    let promise
    try {
      promise = this.sender({
        topic: this.topic,
        messages: items.map(item => item.message),
        acks: s.acks,
        timeout: s.requestTimeout,
        compression: s.compression,
      })
    } catch (e) {
      promise = Promise.reject(e)
    }
    return promise.then(
      results => {
        const nth = new Map() // partition -> records of this call on it so far
        for (const item of items) {
          const chosen = this.partitionOf.has(item.message) ? this.partitionOf.get(item.message) : item.partition
          const k = nth.get(chosen) || 0
          nth.set(chosen, k + 1)
          const result = (results || []).find(r => r.partition === chosen)
          const known = result && result.baseOffset !== undefined && s.acks !== 0
          if (!result && s.acks !== 0) {
            // KafkaJS resolved the call without an answer for this partition (a retry after
            // a leader moved to a broker that had already answered sends nothing there).
            note(`send() succeeded without a result for partition ${chosen}: ${item.head} reported with offset -1`)
          }
          emit({
            name: 'producer_send_success',
            topic: this.topic,
            value: item.head,
            partition: chosen,
            offset: known ? Number(result.baseOffset) + k : -1,
            latency_us: latency(item),
          })
          item.resolve(null)
        }
      },
      error => {
        const code = errorCode(error)
        for (const item of items) {
          const line = {
            name: 'producer_send_error',
            topic: this.topic,
            value: item.head,
            latency_us: latency(item),
            exception: errorName(error),
            message: describe(error),
          }
          if (code !== undefined) line.error_code = code
          emit(line)
          item.resolve(error)
        }
      }
    )
  }

  /** Waits until the sends still pending are reported; after a stop, at most until close-s
   *  after it. True when all were reported. */
  async settle(promises = this.pending) {
    const all = Promise.all(Array.from(promises)).then(() => true)
    while (true) {
      if (this.stopped) {
        const left = this.stoppedAt + this.closeMs - Date.now()
        return Promise.race([all, sleep(Math.max(0, left)).then(() => false)])
      }
      const done = await Promise.race([all, this.whenStopped().then(() => null)])
      if (done !== null) return done
    }
  }

  /** Sleeps until message i is due (true), or returns false at once when it is. */
  async pace(start, i) {
    if (this.rate <= 0) return false
    const due = start + (i * 1000) / this.rate
    const wait = due - performance.now()
    if (wait <= 0) return false
    await Promise.race([sleep(Math.min(wait, 50)), this.whenStopped()])
    return true
  }

  /** Waits while MAX_OUTSTANDING sends are unreported (true), else false at once. */
  async backpressure() {
    if (this.pending.size < MAX_OUTSTANDING) return false
    await Promise.race([Promise.race(Array.from(this.pending)), this.whenStopped()])
    return true
  }
}

function makeKafka(brokers, s) {
  const options = {
    clientId: s.clientId,
    brokers,
    logLevel: logLevel.INFO,
    logCreator,
    requestTimeout: s.requestTimeout,
  }
  return new Kafka(options)
}

function makeProducer(kafka, s, recorder) {
  const retry = { retries: s.retries }
  if (s.initialRetryTime !== undefined) retry.initialRetryTime = s.initialRetryTime
  if (s.maxRetryTime !== undefined) retry.maxRetryTime = s.maxRetryTime
  const options = {
    createPartitioner: () => recorder.partitioner(),
    idempotent: s.idempotent,
    retry,
    transactionTimeout: s.transactionTimeout,
  }
  if (s.maxInFlightRequests !== null) options.maxInFlightRequests = s.maxInFlightRequests
  if (s.transactionalId) options.transactionalId = s.transactionalId
  if (s.metadataMaxAge !== undefined) options.metadataMaxAge = s.metadataMaxAge
  return kafka.producer(options)
}

async function disconnectWithin(client, ms) {
  try {
    await Promise.race([client.disconnect(), sleep(ms)])
  } catch (e) {
    note(`disconnecting: ${describe(e)}`)
  }
}

async function produce(argv) {
  const args = parseArgs(argv)
  const recorder = new Recorder(args)
  const transactional = args.has('--transaction-size')
  const s = producerSettings(readProperties(args.get('--producer.config')), transactional)
  if (s.error) return fail(2, s.error)
  recorder.settings = s
  for (const text of s.notes) note(text)
  const onSignal = () => recorder.stop()
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)
  const kafka = makeKafka(args.get('--bootstrap-server').split(','), s)
  const producer = makeProducer(kafka, s, recorder)
  await producer.connect()
  emit({ name: 'startup_complete' })
  emit({
    name: 'effective_config',
    config: producerEffective(s, transactional),
    idempotent: producer.isIdempotent() || transactional,
  })
  flush()
  let sent
  if (transactional) {
    sent = await new Transactions(recorder, kafka, s, producer).run()
  } else {
    sent = await sendPlain(recorder, producer)
    const all = await recorder.settle()
    if (!all) note(`${recorder.pending.size} sends unreported after --close-s`)
    await disconnectWithin(producer, all ? recorder.closeMs : 1000)
  }
  recorder.progress(sent, true)
  emit({ name: 'shutdown_complete' })
  exitWith(0)
}

/** Sends until the count, the duration or a stop; returns how many were handed over. */
async function sendPlain(recorder, producer) {
  const start = performance.now()
  const end = recorder.duration > 0 ? start + recorder.duration * 1000 : Infinity
  recorder.sender = options => producer.send(options)
  let i = 0
  while (!recorder.stopped && (recorder.max < 0 || i < recorder.max)) {
    if (performance.now() >= end) break
    if (await recorder.pace(start, i)) continue
    if (await recorder.backpressure()) continue
    recorder.sendOne(i, undefined)
    i++
    recorder.progress(i)
    if (i % 64 === 0) await new Promise(resolve => setImmediate(resolve)) // let replies in
  }
  return i
}

/** The sends in transactions, as TransactionalSends.java does them, on KafkaJS's
 *  producer.transaction(). */
class Transactions {
  constructor(recorder, kafka, settings, producer) {
    this.recorder = recorder
    this.kafka = kafka
    this.s = settings
    this.producer = producer
    const args = recorder.args
    this.size = Number(args.get('--transaction-size'))
    this.partitions = Number(args.get('--partitions'))
    this.group = args.get('--offsets-group', '')
    this.onTimeout = args.get('--on-timeout', 'retry')
    if (!['retry', 'abort', 'reinit'].includes(this.onTimeout)) {
      throw new Error('--on-timeout must be retry, abort or reinit')
    }
    this.fatal = false
    this.reinit = false
    this.replaced = 0
    this.intents = intentReader()
  }

  async run() {
    const r = this.recorder
    const start = performance.now()
    const end = r.duration > 0 ? start + r.duration * 1000 : Infinity
    let i = 0
    try {
      for (let txn = 0; !r.stopped && (r.max < 0 || i < r.max) && performance.now() < end; txn++) {
        const intent = await Promise.race([this.intents.next(), r.whenStopped().then(() => undefined)])
        if (intent === undefined) break // stopped
        if (intent === null) {
          note("the harness's plan ended: no more transactions")
          break
        }
        const count = r.max < 0 ? this.size : Math.min(this.size, r.max - i)
        i = await this.transaction(txn, i, count, intent.trim(), start)
        if (this.fatal && (r.stopped || !(await this.replace()))) break
      }
    } finally {
      if (this.producer) {
        await r.settle()
        await disconnectWithin(this.producer, r.closeMs)
      }
    }
    return i
  }

  /** Runs transaction `txn` from the first-th send; returns the next send's index. */
  async transaction(txn, first, count, intent, start) {
    const r = this.recorder
    const beginUs = nowUs()
    this.fatal = false
    const t = await this.begin()
    if (t === null) {
      this.fatal = true // nothing sent in it: no line; the producer is replaced
      return first
    }
    r.sender = options => t.send(options)
    const sends = []
    let refused = null
    let i = first
    while (i < first + count && !r.stopped && refused === null) {
      if (await r.pace(start, i)) continue
      const reported = r.sendOne(i, i % this.partitions)
      sends.push(reported.then(error => {
        if (error && refused === null) refused = error
      }))
      i++
      r.progress(i)
      await new Promise(resolve => setImmediate(resolve)) // a failed send stops the rest
    }
    // KafkaJS's commit and abort do not wait for the sends in flight: wait for them here, as
    // the Java client's commitTransaction (and a planned abort's flush) does.
    if (!(await r.settle(sends))) note(`transaction ${txn}: sends unreported after --close-s`)
    const errors = []
    if (refused !== null) errors.push(`send: ${describe(refused)}`)
    const outcome = await this.end(t, txn, intent, refused !== null, errors)
    emit({
      name: 'transaction_end',
      transaction: txn,
      first_msg_id: r.idBase + first,
      messages: i - first,
      intent,
      outcome,
      error: errors.length ? errors.join('; ') : null,
      begin_ts_us: beginUs,
      end_ts_us: nowUs(),
    })
    flush()
    if (refused !== null && !this.fatal) await sleep(REFUSED_BACKOFF_MS)
    return i
  }

  /** producer.transaction(): the first call of a producer also initialises its producer id
   *  (KafkaJS has no initTransactions of its own), retried after a timeout or a lost
   *  connection (a dead coordinator: KafkaJS does not retry those itself) as Java's
   *  initTransactions is; null when it failed. */
  async begin() {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.producer.transaction()
      } catch (e) {
        const root = rootOf(e)
        const transient = classify(e) === 'timeout' || /^KafkaJSConnection/.test((root && root.name) || '')
        if (!transient || attempt >= INIT_ATTEMPTS || this.recorder.stopped) {
          note(`beginning a transaction failed: ${describe(e)}`)
          return null
        }
        note(`beginning a transaction failed, retrying: ${describe(e)}`)
        await sleep(INIT_BACKOFF_MS)
      }
    }
  }

  /** Ends the open transaction as `intent` says (aborts it whatever the intent when
   *  `mustAbort`): committed, aborted or unknown, the errors on the way added to `errors`;
   *  sets `fatal` when the producer must be replaced. */
  async end(t, txn, intent, mustAbort, errors) {
    let commit = !mustAbort && intent === 'commit'
    let offered = !this.group // the offsets are in the transaction
    let committing = false // commit() was called
    let doubtful = false // a commit timed out: it may have reached the coordinator
    let answeredAbort = false // an abort the answer to a timeout asked for
    this.reinit = false
    for (let attempt = 0; attempt < END_ATTEMPTS; attempt++) {
      const doing = commit ? 'commit' : 'abort'
      try {
        if (commit) {
          if (!offered) {
            await t.sendOffsets({
              consumerGroupId: this.group,
              topics: [{ topic: this.recorder.topic, partitions: [{ partition: 0, offset: String(txn + 1) }] }],
            })
            offered = true
          }
          committing = true
          await t.commit()
          return 'committed'
        }
        await t.abort()
        return doubtful ? 'unknown' : 'aborted'
      } catch (e) {
        errors.push(`${doing}: ${describe(e)}`)
        const kind = classify(e)
        if (kind === 'fatal') break
        if (kind === 'timeout') {
          doubtful = doubtful || (commit && committing)
          if (this.recorder.stopped) break
          // An abort that timed out under `abort` leaves nothing but a new producer.
          const answer = this.onTimeout === 'abort' && !commit ? 'reinit' : this.onTimeout
          if (answer !== 'retry') errors.push(`on timeout: ${answer}`)
          if (answer === 'reinit') {
            this.reinit = true
            break
          }
          if (answer === 'abort') {
            commit = false
            answeredAbort = true
          }
          continue
        }
        if (kind === 'other' && commit) {
          doubtful = doubtful || committing // a commit KafkaJS gave up on may have been written
          commit = false // the documented answer to any other error: abort
          continue
        }
        // an abort that failed for good, or a state KafkaJS refuses the call in
        if (!commit && answeredAbort) {
          errors.push('on timeout: reinit')
          this.reinit = true
        }
        break
      }
    }
    this.fatal = true
    return 'unknown'
  }

  /** Disconnects the producer after a fatal error and makes a fresh one with the same
   *  transactional.id (its first transaction fences the old one); false when REPLACE_ATTEMPTS
   *  are used up or it cannot start. A replacement --on-timeout asked for uses up none. */
  async replace() {
    const old = this.producer
    this.producer = null
    await disconnectWithin(old, CLOSE_FATAL_MS)
    if (!this.reinit) this.replaced++
    this.reinit = false
    if (this.replaced > REPLACE_ATTEMPTS) {
      note('too many fatal errors, stopping the workload')
      return false
    }
    this.producer = makeProducer(this.kafka, this.s, this.recorder)
    for (let attempt = 1; ; attempt++) {
      try {
        await this.producer.connect()
        return true
      } catch (e) {
        if (attempt >= INIT_ATTEMPTS || this.recorder.stopped) {
          note(`the producer could not be replaced: ${describe(e)}`)
          this.producer = null
          return false
        }
        note(`connecting the new producer failed, retrying: ${describe(e)}`)
        await sleep(INIT_BACKOFF_MS)
      }
    }
  }
}

/** The harness's plan on stdin, one intent a line: next() resolves to the next line, or null
 *  at the end of stdin. */
function intentReader() {
  const lines = []
  const waiting = []
  let ended = false
  let rest = ''
  process.stdin.setEncoding('utf8')
  process.stdin.on('data', chunk => {
    rest += chunk
    let at
    while ((at = rest.indexOf('\n')) >= 0) {
      const line = rest.slice(0, at)
      rest = rest.slice(at + 1)
      if (waiting.length) waiting.shift()(line)
      else lines.push(line)
    }
  })
  const finish = () => {
    if (ended) return
    ended = true
    if (rest !== '') {
      if (waiting.length) waiting.shift()(rest)
      else lines.push(rest)
      rest = ''
    }
    for (const wake of waiting.splice(0)) wake(null)
  }
  process.stdin.on('end', finish)
  process.stdin.on('error', finish)
  return {
    next() {
      if (lines.length) return Promise.resolve(lines.shift())
      if (ended) return Promise.resolve(null)
      return new Promise(resolve => waiting.push(resolve))
    },
  }
}

// ---------------------------------------------------------------------------------------------
// consume

/** The message id at the head of a value the harness wrote ("<msg_id>:<key_seq>:..."), -1
 *  for any other value. */
function msgId(value) {
  if (!value) return -1
  let id = 0
  let i = 0
  for (; i < value.length && value[i] !== 0x3a; i++) {
    if (value[i] < 0x30 || value[i] > 0x39 || i >= 18) return -1
    id = id * 10 + (value[i] - 0x30)
  }
  return i === 0 || i === value.length ? -1 : id
}

async function consume(argv) {
  const args = parseArgs(argv)
  const topic = args.get('--topic')
  const group = args.get('--group')
  const mode = args.get('--commit')
  if (!['auto', 'after-process', 'before-process'].includes(mode)) {
    return fail(2, `unknown commit mode ${mode}`)
  }
  const processingMs = Number(args.get('--processing-ms', '0'))
  const sessionTimeout = Number(args.get('--session-timeout-ms', '6000'))
  const heartbeatInterval = Number(args.get('--heartbeat-ms', '1000'))
  const processed = fs.openSync(args.get('--processed'), 'a')
  const commits = fs.openSync(args.get('--commits'), 'a')
  const clientId = args.get('--client-id', 'kchaos-consumer')

  // The end of stdin means the harness is gone: halt, as a killed member would.
  process.stdin.on('data', () => {})
  process.stdin.on('end', () => process.exit(3))
  process.stdin.on('error', () => process.exit(3))
  process.stdin.resume()

  const line = obj => {
    emit(obj)
    flush()
  }
  const kafka = new Kafka({ clientId, brokers: args.get('--bootstrap-server').split(','), logLevel: logLevel.INFO, logCreator })
  const consumer = kafka.consumer({
    groupId: group,
    sessionTimeout,
    heartbeatInterval,
    readUncommitted: false, // read_committed: an aborted message a member processes is an aborted read
  })
  line({
    name: 'effective_config',
    config: {
      'group.id': group,
      'client.id': clientId,
      'isolation.level': 'read_committed',
      'auto.offset.reset': 'earliest (kafkajs fromBeginning: true)',
      'enable.auto.commit': String(mode === 'auto'),
      'auto.commit.interval.ms':
        mode === 'auto' ? 'after each batch (kafkajs autoCommitInterval null)' : 'none (no auto commit)',
      'session.timeout.ms': String(sessionTimeout),
      'heartbeat.interval.ms': String(heartbeatInterval),
      'max.poll.interval.ms': 'none (kafkajs rebalanceTimeout 60000; heartbeats from the processing loop)',
      'partition.assignment.strategy': 'kafkajs RoundRobinAssigner',
      'group.protocol': 'classic',
      'client.version': `kafkajs ${KAFKAJS_VERSION}`,
    },
  })

  const held = new Set()
  const holding = name => line({ name, partitions: Array.from(held).sort((a, b) => a - b), ts_us: nowUs() })
  const writeRows = (fd, rows) => {
    if (rows.length) fs.writeSync(fd, rows.map(row => JSON.stringify(row) + '\n').join(''))
  }
  const { GROUP_JOIN, REBALANCING, CRASH, COMMIT_OFFSETS } = consumer.events
  consumer.on(GROUP_JOIN, event => {
    held.clear()
    for (const p of event.payload.memberAssignment[topic] || []) held.add(p)
    holding('partitions_assigned')
  })
  consumer.on(REBALANCING, () => {
    // KafkaJS's group protocol is eager: a rejoin gives up every partition first.
    held.clear()
    holding('partitions_revoked')
  })
  let stopping = false
  consumer.on(CRASH, event => {
    held.clear()
    holding('partitions_lost')
    if (!event.payload.restart && !stopping) {
      line({ name: 'error', message: describe(event.payload.error) })
      exitWith(1)
    }
  })
  let commitEvents = 0
  consumer.on(COMMIT_OFFSETS, event => {
    commitEvents++
    if (mode !== 'auto') return
    const ts = nowUs()
    const rows = []
    for (const t of event.payload.topics || []) {
      if (t.topic !== topic) continue
      for (const p of t.partitions) rows.push([Number(p.partition), Number(p.offset), 'ok', ts])
    }
    writeRows(commits, rows)
  })

  const onSignal = async () => {
    if (stopping) return
    stopping = true
    try {
      await consumer.disconnect() // leaves the group
    } catch (e) {
      note(`leaving the group: ${describe(e)}`)
    }
    if (held.size) {
      held.clear()
      holding('partitions_revoked')
    }
    line({ name: 'shutdown_complete' })
    exitWith(0)
  }
  process.on('SIGTERM', onSignal)
  process.on('SIGINT', onSignal)

  /** Commits the next offset after `rows` (one partition's), journals the outcome; whether it
   *  succeeded. */
  const commitRows = async (partition, rows) => {
    const next = rows.reduce((m, row) => Math.max(m, row[2]), -1) + 1
    const before = commitEvents
    let outcome = 'ok'
    try {
      await consumer.commitOffsets([{ topic, partition, offset: String(next) }])
      // KafkaJS skips a commit, or swallows its error, once the consumer is stopping.
      if (commitEvents === before) outcome = 'KafkaJSConsumerStopping'
    } catch (e) {
      outcome = errorName(e)
    }
    writeRows(commits, [[partition, next, outcome, nowUs()]])
    return outcome === 'ok'
  }

  const processRows = async (rows, heartbeat) => {
    if (processingMs <= 0) {
      const ts = nowUs()
      writeRows(processed, rows.map(row => [...row, ts]))
      return
    }
    for (const row of rows) {
      await sleep(processingMs)
      writeRows(processed, [[...row, nowUs()]])
      await heartbeat() // KafkaJS heartbeats only from the processing loop
    }
  }

  await consumer.connect()
  await consumer.subscribe({ topics: [topic], fromBeginning: true })
  line({ name: 'startup_complete' })
  await consumer.run({
    autoCommit: mode === 'auto',
    eachBatchAutoResolve: true,
    eachBatch: async ({ batch, heartbeat, isRunning }) => {
      if (!isRunning()) return
      const rows = batch.messages.map(m => [msgId(m.value), batch.partition, Number(m.offset)])
      if (!rows.length) return
      if (mode === 'before-process') {
        if (await commitRows(batch.partition, rows)) await processRows(rows, heartbeat)
      } else {
        await processRows(rows, heartbeat)
        if (mode === 'after-process') await commitRows(batch.partition, rows)
      }
    },
  })
}

// ---------------------------------------------------------------------------------------------

async function main() {
  const [role, ...rest] = process.argv.slice(2)
  if (role === 'produce') return produce(rest)
  if (role === 'consume') return consume(rest)
  return fail(2, `usage: client.js produce|consume <arguments> (got ${role})`)
}

main().catch(e => {
  const role = process.argv[2]
  if (role === 'consume') emit({ name: 'error', message: describe(e) })
  note(`fatal: ${e && e.stack ? e.stack : e}`)
  exitWith(1)
})
