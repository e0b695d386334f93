fn main() {
    println!("chapters: pending");
}
